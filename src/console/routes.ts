import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { tokenActor } from '../admin/auditLog.js';
import { checkOperatorPassword, checkOperatorTotp, countOperators, createOperator } from '../auth/operators.js';
import { constantTimeEqual } from '../auth/secrets.js';
import type { AppContext } from '../context.js';
import { resolveClientIp } from '../http/clientIp.js';
import { FORM_LIMIT_BYTES, one, parseForm, postsAForm, type Form } from '../portal/formBody.js';
import { html, PORTAL_CSS } from '../portal/html.js';
import { sameOrigin } from '../portal/routes.js';
import { auditedWrite } from './audit.js';
import { consoleKit, enrollment, localeOfRequest, refusalText, type ConsoleKit } from './kit.js';
import { CM } from './messages.js';
import { dictionary, isLocale, LOCALE_COOKIE } from '../portal/i18n.js';
import { accountPages } from './pages/account.js';
import { auditPages } from './pages/audit.js';
import { medPages } from './pages/med.js';
import { operatorPages } from './pages/operators.js';
import { searchPages } from './pages/search.js';
import { simulatorPages } from './pages/simulator.js';
import { webhookPages } from './pages/webhooks.js';
import { closeConsoleSession, consoleCsrfMatches, loadConsoleSession, openConsoleSession, setConsoleFlash } from './session.js';

/**
 * The operator console at /console (docs/console.md): server-rendered pages for the people who run
 * pixgate, over the same domain functions as the admin API. Registered only when enabled
 * (`config.consoleEnabled`); otherwise every /console path is the server's 404.
 */
export const CONSOLE_SIGN_IN_FAILURES_PER_MINUTE = 10;
/** The portal's stylesheet, and long merchant-supplied values wrap inside their cells. */
const CONSOLE_CSS = `${PORTAL_CSS}\ntd,.grid div{overflow-wrap:anywhere}main{max-width:1240px}header .muted{color:#c9d1d9}.badge,button,td.num,.nowrap{overflow-wrap:normal;white-space:nowrap}\n`;
const PUBLIC = new Set(['/console/login', '/console/bootstrap', '/console/assets/console.css', '/console/language']);

export function consoleRoutes(ctx: AppContext) {
  return async function plugin(app: FastifyInstance) {
    app.decorateRequest('console', null);
    app.addContentTypeParser('application/x-www-form-urlencoded', { parseAs: 'string', bodyLimit: FORM_LIMIT_BYTES }, (_req, body, done) =>
      done(null, parseForm(body as string)),
    );
    const kit = consoleKit(ctx, ctx.config.appEnv !== 'production', (s, kind, text) => setConsoleFlash(ctx.db, s, kind, text));
    guard(app, kit);
    app.get('/console/assets/console.css', async (_req, reply) => reply.type('text/css; charset=utf-8').header('cache-control', 'public, max-age=3600').send(CONSOLE_CSS));
    app.get('/console/language', async (req, reply) => {
      const q = req.query as Record<string, unknown>;
      const attrs = `Path=/console; SameSite=Lax; Max-Age=31536000${ctx.config.appEnv === 'production' ? '; Secure' : ''}`;
      if (isLocale(q.to)) void reply.header('set-cookie', `${LOCALE_COOKIE}=${q.to}; ${attrs}`);
      const next = typeof q.next === 'string' && /^\/console(\/[A-Za-z0-9/_.-]*)?$/.test(q.next) ? q.next : '/console';
      return reply.redirect(next, 303);
    });
    signInPages(app, kit);
    searchPages(app, kit);
    accountPages(app, kit);
    webhookPages(app, kit);
    auditPages(app, kit);
    medPages(app, kit);
    operatorPages(app, kit);
    simulatorPages(app, kit);
    app.get('/console/*', async (req, reply) => {
      const t = CM(localeOfRequest(req));
      return kit.page(reply, kit.layout(req, t.notFound, html`<p>${t.noSuchPage} <a href="/console">${t.navSearch}</a>.</p>`), 404);
    });
  };
}

function guard(app: FastifyInstance, kit: ConsoleKit) {
  const { ctx, layout, page } = kit;
  app.addHook('onSend', async (_req, reply, payload) => {
    void reply.header('cache-control', 'no-store');
    void reply.header('x-content-type-options', 'nosniff');
    void reply.header('referrer-policy', 'same-origin');
    void reply.header('x-frame-options', 'DENY');
    void reply.header('content-security-policy', "default-src 'none'; style-src 'self'; img-src 'self' data:; form-action 'self'; frame-ancestors 'none'; base-uri 'none'");
    return payload;
  });
  app.addHook('preHandler', async (req, reply) => {
    const path = req.url.split('?')[0]!;
    const t = CM(localeOfRequest(req));
    if (req.method === 'POST' && !sameOrigin(req.headers.origin, req.headers.host)) {
      return page(reply, layout(req, t.refused, html`<p data-testid="refused">${t.crossSite}</p>`), 403);
    }
    if (req.method === 'POST' && !postsAForm(req.headers['content-type'], req.body)) {
      return page(reply, layout(req, t.refused, html`<p data-testid="refused">${t.notAForm}</p>`), 415);
    }
    if (PUBLIC.has(path)) return;
    const s = await loadConsoleSession(ctx, req);
    if (!s) return reply.redirect('/console/login', 303);
    req.console = s;
    if (req.method === 'POST' && (typeof req.body !== 'object' || req.body === null || !consoleCsrfMatches(s, one(req.body as Form, '_csrf')))) {
      return page(reply, layout(req, t.refused, html`<p data-testid="refused">${t.csrf}</p>`), 403);
    }
  });
}

const clientIp = (ctx: AppContext, req: FastifyRequest) => resolveClientIp(req.socket.remoteAddress ?? '', req.headers['x-forwarded-for'], ctx.config.trustedProxies);

/** Counts a failed sign-in or bootstrap from this address; true when past the limit. */
async function tooManyFailures(ctx: AppContext, req: FastifyRequest, count: boolean): Promise<boolean> {
  const key = `console-auth-failure:${clientIp(ctx, req)}`;
  try {
    const hit = count ? await ctx.rateCounter.hit(key, CONSOLE_SIGN_IN_FAILURES_PER_MINUTE, 60) : undefined;
    return hit !== undefined && !hit.allowed;
  } catch {
    return false;
  }
}

function signInPages(app: FastifyInstance, kit: ConsoleKit) {
  const { ctx, layout, page } = kit;
  const loginForm = (req: FastifyRequest, error = '', username = '') => {
    const t = SM(localeOfRequest(req));
    return html`${error ? html`<div class="flash error" role="alert">${error}</div>` : ''}
<form class="stack card" method="post" action="/console/login">
<label>${t.username} <input name="username" autocomplete="username" required maxlength="40" value="${username}"></label>
<label>${t.password} <input name="password" type="password" autocomplete="current-password" required maxlength="200"></label>
<label>${t.code} <input name="code" inputmode="numeric" autocomplete="one-time-code" required pattern="[0-9 ]{6,7}" maxlength="7"></label>
<button type="submit">${t.signIn}</button></form>`;
  };

  app.get('/console/login', async (req, reply) => {
    if ((await countOperators(ctx.db)) === 0) return reply.redirect('/console/bootstrap', 303);
    return page(reply, layout(req, SM(localeOfRequest(req)).title, html`<div class="login">${loginForm(req)}</div>`));
  });

  app.post('/console/login', async (req, reply) => {
    const f = req.body as Form;
    const t = SM(localeOfRequest(req));
    const username = (one(f, 'username') ?? '').trim().toLowerCase();
    const refuse = async (why: string, status: number) => page(reply, layout(req, t.title, html`<div class="login">${loginForm(req, why, username)}</div>`), status);
    if (await tooManyFailures(ctx, req, false)) return refuse(t.tooMany, 429);
    const operator = await checkOperatorPassword(ctx.db, username, one(f, 'password') ?? '');
    const ok = operator !== undefined && (await checkOperatorTotp(ctx.db, operator, one(f, 'code') ?? '', ctx.wallClock.now()));
    if (!ok) {
      const limited = await tooManyFailures(ctx, req, true);
      return refuse(limited ? t.tooMany : t.wrong, limited ? 429 : 401);
    }
    await openConsoleSession(ctx, reply, operator.id);
    return reply.redirect('/console', 303);
  });

  app.post('/console/logout', async (req, reply) => {
    await closeConsoleSession(ctx, reply, req.console);
    return reply.redirect('/console/login', 303);
  });

  const bootstrapForm = (req: FastifyRequest, error = '') => {
    const t = SM(localeOfRequest(req));
    return html`<p>${t.noOperator} <code>ADMIN_TOKEN</code>${t.worksOnce}</p>
${error ? html`<div class="flash error" role="alert">${error}</div>` : ''}
<form class="stack card" method="post" action="/console/bootstrap">
<label>${t.adminToken} <input name="admin_token" type="password" autocomplete="off" required maxlength="512"></label>
<label>${t.ownerName} <input name="username" autocomplete="username" required maxlength="40"></label>
<label>${t.newPassword} <input name="password" type="password" autocomplete="new-password" required minlength="12" maxlength="200"></label>
<button type="submit">${t.createOwner}</button></form>`;
  };

  const done = (req: FastifyRequest, reply: FastifyReply) => {
    const t = SM(localeOfRequest(req));
    return page(reply, layout(req, t.setUp, html`<p>${t.ownerExists} <a href="/console/login">${t.signIn}</a>.</p>`), 409);
  };

  app.get('/console/bootstrap', async (req, reply) => {
    if ((await countOperators(ctx.db)) > 0) return done(req, reply);
    return page(reply, layout(req, SM(localeOfRequest(req)).setUpTitle, html`<div class="login">${bootstrapForm(req)}</div>`));
  });

  app.post('/console/bootstrap', async (req, reply) => {
    const f = req.body as Form;
    const L = localeOfRequest(req);
    const t = SM(L);
    if ((await countOperators(ctx.db)) > 0) return done(req, reply);
    if (await tooManyFailures(ctx, req, false)) return page(reply, layout(req, t.setUpTitle, bootstrapForm(req, t.tooManyAttempts)), 429);
    const token = one(f, 'admin_token') ?? '';
    if (token === '' || !constantTimeEqual(token, ctx.config.adminToken)) {
      await tooManyFailures(ctx, req, true);
      return page(reply, layout(req, t.setUpTitle, html`<div class="login">${bootstrapForm(req, t.notToken)}</div>`), 401);
    }
    const username = (one(f, 'username') ?? '').trim().toLowerCase();
    try {
      const { operator, totpSecret } = await auditedWrite(
        ctx,
        req,
        tokenActor(ctx.config.adminToken),
        { username, role: 'owner' },
        () => createOperator(ctx.db, { username, password: one(f, 'password') ?? '', role: 'owner', createdBy: tokenActor(ctx.config.adminToken), onlyFirst: true }),
        (r) => ({ operator_id: r.operator.id }),
      );
      return page(reply, layout(req, t.ownerCreated, enrollment(L, operator.username, totpSecret)));
    } catch (err) {
      return page(reply, layout(req, t.setUpTitle, html`<div class="login">${bootstrapForm(req, refusalText(err, L))}</div>`), 422);
    }
  });
}

const SM = dictionary(
  {
    title: 'Operator sign-in',
    username: 'Username',
    password: 'Password',
    code: 'Code from your authenticator app',
    signIn: 'Sign in',
    tooMany: 'Too many failed sign-ins from this address; wait a minute.',
    wrong: 'Wrong username, password or code.',
    noOperator: "No operator exists yet. The first owner is created with the server's",
    worksOnce: '; this page works once.',
    adminToken: 'Admin token',
    ownerName: 'Username of the owner',
    newPassword: 'Password (at least 12 characters)',
    createOwner: 'Create the owner',
    setUp: 'Console set up',
    setUpTitle: 'Set up the console',
    ownerExists: 'The first owner exists.',
    tooManyAttempts: 'Too many failed attempts; wait a minute.',
    notToken: 'That is not the admin token.',
    ownerCreated: 'Owner created',
  },
  {
    title: 'Login do operador',
    username: 'Usuário',
    password: 'Senha',
    code: 'Código do aplicativo autenticador',
    signIn: 'Entrar',
    tooMany: 'Muitos logins falhos deste endereço; aguarde um minuto.',
    wrong: 'Usuário, senha ou código incorretos.',
    noOperator: 'Ainda não há operador. O primeiro proprietário é criado com o',
    worksOnce: ' do servidor; esta página funciona uma vez.',
    adminToken: 'Token de administração',
    ownerName: 'Usuário do proprietário',
    newPassword: 'Senha (no mínimo 12 caracteres)',
    createOwner: 'Criar o proprietário',
    setUp: 'Console configurado',
    setUpTitle: 'Configurar o console',
    ownerExists: 'O primeiro proprietário já existe.',
    tooManyAttempts: 'Muitas tentativas falhas; aguarde um minuto.',
    notToken: 'Este não é o token de administração.',
    ownerCreated: 'Proprietário criado',
  },
);
