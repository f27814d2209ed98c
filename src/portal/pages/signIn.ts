import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { authenticate } from '../../auth/credentials.js';
import { whitelistAllows } from '../../auth/ipWhitelist.js';
import { one, type Form } from '../formBody.js';
import { html } from '../html.js';
import type { Portal } from '../kit.js';
import { dictionary } from '../i18n.js';
import { createSession, endSession } from '../session.js';
import { teamText } from './teamText.js';

/** The spec's limit for merchant authentication endpoints: sign-in attempts per minute per address. */
export const PORTAL_SIGN_IN_PER_MINUTE = 5;

const M = dictionary(
  {
    title: 'Sign in',
    clientId: 'Client ID',
    clientSecret: 'Client secret',
    submit: 'Sign in',
    help: 'Use an API key of your account. Its IP whitelist and permissions apply here as in the API.',
    tooMany: 'Too many sign-in attempts from your address. Wait a minute and try again.',
    wrong: 'Wrong client ID or secret, or the key is revoked or expired.',
    expired: 'Your session expired; sign in again.',
    key: 'The API key of your session is no longer valid.',
    ip: 'Your address is not in the API key’s IP whitelist.',
    inactive: 'The account is not active.',
    member: 'Your membership was removed or changed; sign in again.',
  },
  {
    title: 'Entrar',
    clientId: 'Client ID',
    clientSecret: 'Client secret (segredo)',
    submit: 'Entrar',
    help: 'Use uma chave de API da sua conta. A lista de IPs permitidos e as permissões dela valem aqui como na API.',
    tooMany: 'Tentativas demais de entrar a partir do seu endereço. Espere um minuto e tente de novo.',
    wrong: 'Client ID ou segredo errado, ou a chave foi revogada ou expirou.',
    expired: 'Sua sessão expirou; entre de novo.',
    key: 'A chave de API da sua sessão não é mais válida.',
    ip: 'Seu endereço não está na lista de IPs permitidos da chave de API.',
    inactive: 'A conta não está ativa.',
    member: 'Seu acesso foi removido ou alterado; entre de novo.',
  },
);

/** Why a session ended, as `?why=` on the sign-in page says it. */
const WHY = ['expired', 'key', 'ip', 'inactive', 'member'] as const;
const isWhy = (v: unknown): v is (typeof WHY)[number] => typeof v === 'string' && (WHY as readonly string[]).includes(v);

/** Sign-in with an API key, sign-out, and the home page (the first page the key opens). */
export function signInPages(app: FastifyInstance, portal: Portal) {
  const { ctx, layout, page } = portal;

  const loginPage = (req: FastifyRequest, message: string | null, clientId = '') => {
    const m = M(req.i18n);
    return layout(
      req,
      m.title,
      html`<div class="card login">
${message ? html`<div class="flash error" role="alert">${message}</div>` : ''}
<form class="stack" method="post" action="/portal/login">
<label>${m.clientId} <input name="client_id" autocomplete="username" required maxlength="100" spellcheck="false"${clientId ? html` value="${clientId}"` : ''}></label>
<label>${m.clientSecret} <input name="client_secret" type="password" autocomplete="current-password" required maxlength="200"></label>
<button type="submit">${m.submit}</button></form>
<p class="muted">${m.help}</p>
<p><a href="/portal/signin">${teamText(req.i18n).useEmailInstead}</a></p></div>`,
    );
  };

  app.get('/portal/login', async (req, reply) => {
    const why = (req.query as Record<string, string>).why;
    return page(reply, loginPage(req, isWhy(why) ? M(req.i18n)[why] : null));
  });

  app.post('/portal/login', async (req, reply) => {
    const ip = portal.clientIp(req);
    try {
      const hit = await ctx.rateCounter.hit(`portal-sign-in:${ip}`, PORTAL_SIGN_IN_PER_MINUTE, 60);
      if (!hit.allowed) {
        void reply.header('retry-after', String(hit.retryAfter));
        return page(reply, loginPage(req, M(req.i18n).tooMany), 429);
      }
    } catch (err) {
      req.log.warn({ err: (err as Error).message }, 'portal sign-in limiter unavailable');
    }
    const form = (typeof req.body === 'object' && req.body ? req.body : {}) as Form;
    const id = one(form, 'client_id')?.trim() ?? '';
    const secret = one(form, 'client_secret') ?? '';
    const result = await authenticate((id) => ctx.credentials.apiKey(ctx.db, id), ctx.wallClock, id && secret ? `ApiKey ${id}:${secret}` : undefined);
    const m = M(req.i18n);
    const typed = id.slice(0, 100);
    if (!('key' in result)) return page(reply, loginPage(req, m.wrong, typed), 401);
    const { key } = result;
    if (key.ip_whitelist.length === 0 || !whitelistAllows(key.ip_whitelist, ip)) return page(reply, loginPage(req, m.ip, typed), 403);
    if (key.operating_account_id === null || key.account_status !== 'active' || key.merchant_status !== 'active') return page(reply, loginPage(req, m.inactive, typed), 403);
    await createSession(ctx, reply, key.client_id);
    return reply.redirect('/portal', 303);
  });

  app.post('/portal/logout', async (req, reply) => {
    await endSession(ctx, reply, req.portal);
    return reply.redirect('/portal/login', 303);
  });

  const home = async (req: FastifyRequest, reply: FastifyReply) =>
    reply.redirect(portal.firstPage(req.portal!) ?? '/portal/balance', 303); // none: the balance page says which permission is missing
  app.get('/portal', home);
  app.get('/portal/', home);
}
