import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { tokenActor } from '../admin/auditLog.js';
import { checkOperatorPassword, checkOperatorTotp, countOperators, createOperator } from '../auth/operators.js';
import { constantTimeEqual } from '../auth/secrets.js';
import type { AppContext } from '../context.js';
import { resolveClientIp } from '../http/clientIp.js';
import { FORM_LIMIT_BYTES, one, parseForm, type Form } from '../portal/formBody.js';
import { html, PORTAL_CSS } from '../portal/html.js';
import { sameOrigin } from '../portal/routes.js';
import { auditedWrite } from './audit.js';
import { consoleKit, enrollment, refusalText, type ConsoleKit } from './kit.js';
import { accountPages } from './pages/account.js';
import { auditPages } from './pages/audit.js';
import { medPages } from './pages/med.js';
import { operatorPages } from './pages/operators.js';
import { searchPages } from './pages/search.js';
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
const PUBLIC = new Set(['/console/login', '/console/bootstrap', '/console/assets/console.css']);

export function consoleRoutes(ctx: AppContext) {
  return async function plugin(app: FastifyInstance) {
    app.decorateRequest('console', null);
    app.addContentTypeParser('application/x-www-form-urlencoded', { parseAs: 'string', bodyLimit: FORM_LIMIT_BYTES }, (_req, body, done) =>
      done(null, parseForm(body as string)),
    );
    const kit = consoleKit(ctx, (s, kind, text) => setConsoleFlash(ctx.db, s, kind, text));
    guard(app, kit);
    app.get('/console/assets/console.css', async (_req, reply) => reply.type('text/css; charset=utf-8').header('cache-control', 'public, max-age=3600').send(CONSOLE_CSS));
    signInPages(app, kit);
    searchPages(app, kit);
    accountPages(app, kit);
    webhookPages(app, kit);
    auditPages(app, kit);
    medPages(app, kit);
    operatorPages(app, kit);
    app.get('/console/*', async (req, reply) => kit.page(reply, kit.layout(req, 'Not found', html`<p>There is no such page. <a href="/console">Search</a>.</p>`), 404));
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
    if (req.method === 'POST' && !sameOrigin(req.headers.origin, req.headers.host)) {
      return page(reply, layout(req, 'Refused', html`<p data-testid="refused">Cross-site form submissions are refused.</p>`), 403);
    }
    if (PUBLIC.has(path)) return;
    const s = await loadConsoleSession(ctx, req);
    if (!s) return reply.redirect('/console/login', 303);
    req.console = s;
    if (req.method === 'POST' && (typeof req.body !== 'object' || req.body === null || !consoleCsrfMatches(s, one(req.body as Form, '_csrf')))) {
      return page(reply, layout(req, 'Refused', html`<p data-testid="refused">The form was out of date or not sent from this console (CSRF check). Go back, reload and try again.</p>`), 403);
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
  const loginForm = (error = '', username = '') => html`${error ? html`<div class="flash error" role="alert">${error}</div>` : ''}
<form class="stack card" method="post" action="/console/login">
<label>Username <input name="username" autocomplete="username" required maxlength="40" value="${username}"></label>
<label>Password <input name="password" type="password" autocomplete="current-password" required maxlength="200"></label>
<label>Code from your authenticator app <input name="code" inputmode="numeric" autocomplete="one-time-code" required pattern="[0-9 ]{6,7}" maxlength="7"></label>
<button type="submit">Sign in</button></form>`;

  app.get('/console/login', async (req, reply) => {
    if ((await countOperators(ctx.db)) === 0) return reply.redirect('/console/bootstrap', 303);
    return page(reply, layout(req, 'Operator sign-in', html`<div class="login">${loginForm()}</div>`));
  });

  app.post('/console/login', async (req, reply) => {
    const f = req.body as Form;
    const username = (one(f, 'username') ?? '').trim().toLowerCase();
    const refuse = async (why: string, status: number) => page(reply, layout(req, 'Operator sign-in', html`<div class="login">${loginForm(why, username)}</div>`), status);
    if (await tooManyFailures(ctx, req, false)) return refuse('Too many failed sign-ins from this address; wait a minute.', 429);
    const operator = await checkOperatorPassword(ctx.db, username, one(f, 'password') ?? '');
    const ok = operator !== undefined && (await checkOperatorTotp(ctx.db, operator, one(f, 'code') ?? '', ctx.wallClock.now()));
    if (!ok) {
      const limited = await tooManyFailures(ctx, req, true);
      return refuse(limited ? 'Too many failed sign-ins from this address; wait a minute.' : 'Wrong username, password or code.', limited ? 429 : 401);
    }
    await openConsoleSession(ctx, reply, operator.id);
    return reply.redirect('/console', 303);
  });

  app.post('/console/logout', async (req, reply) => {
    await closeConsoleSession(ctx, reply, req.console);
    return reply.redirect('/console/login', 303);
  });

  const bootstrapForm = (error = '') => html`<p>No operator exists yet. The first owner is created with the server's <code>ADMIN_TOKEN</code>; this page works once.</p>
${error ? html`<div class="flash error" role="alert">${error}</div>` : ''}
<form class="stack card" method="post" action="/console/bootstrap">
<label>Admin token <input name="admin_token" type="password" autocomplete="off" required maxlength="512"></label>
<label>Username of the owner <input name="username" autocomplete="username" required maxlength="40"></label>
<label>Password (at least 12 characters) <input name="password" type="password" autocomplete="new-password" required minlength="12" maxlength="200"></label>
<button type="submit">Create the owner</button></form>`;

  const done = (req: FastifyRequest, reply: FastifyReply) =>
    page(reply, layout(req, 'Console set up', html`<p>The first owner exists. <a href="/console/login">Sign in</a>.</p>`), 409);

  app.get('/console/bootstrap', async (req, reply) => {
    if ((await countOperators(ctx.db)) > 0) return done(req, reply);
    return page(reply, layout(req, 'Set up the console', html`<div class="login">${bootstrapForm()}</div>`));
  });

  app.post('/console/bootstrap', async (req, reply) => {
    const f = req.body as Form;
    if ((await countOperators(ctx.db)) > 0) return done(req, reply);
    if (await tooManyFailures(ctx, req, false)) return page(reply, layout(req, 'Set up the console', bootstrapForm('Too many failed attempts; wait a minute.')), 429);
    const token = one(f, 'admin_token') ?? '';
    if (token === '' || !constantTimeEqual(token, ctx.config.adminToken)) {
      await tooManyFailures(ctx, req, true);
      return page(reply, layout(req, 'Set up the console', html`<div class="login">${bootstrapForm('That is not the admin token.')}</div>`), 401);
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
      return page(reply, layout(req, 'Owner created', enrollment(operator.username, totpSecret)));
    } catch (err) {
      return page(reply, layout(req, 'Set up the console', html`<div class="login">${bootstrapForm(refusalText(err))}</div>`), 422);
    }
  });
}
