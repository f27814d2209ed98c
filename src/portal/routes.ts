import type { FastifyInstance } from 'fastify';
import type { AppContext } from '../context.js';
import { simulator } from '../sandbox/actions.js';
import { FORM_LIMIT_BYTES, one, parseForm, postsAForm, type Form } from './formBody.js';
import { html, PORTAL_CSS } from './html.js';
import { portalKit, type Portal } from './kit.js';
import { balancePage } from './pages/balance.js';
import { chargePages } from './pages/charges.js';
import { medPages } from './pages/med.js';
import { sandboxPages } from './pages/sandbox.js';
import { signInPages } from './pages/signIn.js';
import { statementPages } from './pages/statement.js';
import { tefPages } from './pages/tef.js';
import { transactionPage } from './pages/transaction.js';
import { receiptPages } from './pages/receipt.js';
import { timelinePage } from './pages/timeline.js';
import { webhookPages } from './pages/webhooks.js';
import { csrfMatches, endSession, loadSession, readCookie, type PortalSession } from './session.js';
import { keyPages } from './pages/keys.js';
import { memberSignInPages } from './pages/memberSignIn.js';
import { teamPages } from './pages/team.js';
import { isLocale, isTimeZone, LOCALE_COOKIE, localeOf, TIME_ZONE_COOKIE, type PortalLocale } from './i18n.js';
import { common } from './messages.js';

/**
 * The merchant portal at /portal (docs/portal.md): server-rendered pages over the same domain
 * functions the merchant API calls, signed in with an API key. No JavaScript, no external assets.
 * This file holds what guards every page (headers, session, CSRF); each page lives in pages/, and
 * what they share (the frame, forms that run once) in kit.ts.
 */

/**
 * The CSRF origin check of a POST: no Origin (a browser that sends none; the CSRF token and the
 * SameSite cookie still apply) or one naming this host. `null`, anything that is not a URL, and
 * another host are refused.
 */
export function sameOrigin(origin: string | undefined, host: string | undefined): boolean {
  if (origin === undefined) return true;
  if (host === undefined || origin === 'null') return false;
  try {
    return new URL(origin).host === host;
  } catch {
    return false;
  }
}

export function portalRoutes(ctx: AppContext) {
  const sim = ctx.config.appEnv === 'production' ? null : simulator(ctx);
  const portal = portalKit(ctx, sim !== null);

  return async function plugin(app: FastifyInstance) {
    app.decorateRequest('portal', null);
    app.decorateRequest('i18n', null as unknown as PortalLocale);
    app.addContentTypeParser('application/x-www-form-urlencoded', { parseAs: 'string', bodyLimit: FORM_LIMIT_BYTES }, (_req, body, done) =>
      done(null, parseForm(body as string)),
    );
    guardPages(app, portal);

    languageSwitch(app, ctx.config.tls);
    app.get('/portal/assets/portal.css', async (_req, reply) => reply.type('text/css; charset=utf-8').header('cache-control', 'public, max-age=3600').send(PORTAL_CSS));

    signInPages(app, portal);
    memberSignInPages(app, portal);
    keyPages(app, portal);
    teamPages(app, portal);
    balancePage(app, portal);
    statementPages(app, portal);
    transactionPage(app, portal);
    receiptPages(app, portal);
    timelinePage(app, portal);
    chargePages(app, portal);
    tefPages(app, portal);
    webhookPages(app, portal);
    medPages(app, portal);
    if (sim) sandboxPages(app, portal, sim);

    // Any other page under /portal: the portal's own "not found" (after the session check).
    app.get('/portal/*', async (req, reply) =>
      portal.page(reply, portal.layout(req, common(req.i18n).notFound, html`<p>${common(req.i18n).notFoundText} <a href="/portal">${common(req.i18n).goToPortal}</a>.</p>`), 404),
    );
  };
}

/** Pages that need no session: sign-in (key or member), the language switch, a receipt's verification (and an invitation's link). */
const PUBLIC_PATHS = new Set(['/portal/login', '/portal/signin', '/portal/language', '/portal/receipts/verify']);
const SECOND_FACTOR_PATHS = new Set(['/portal/signin/totp', '/portal/account/totp', '/portal/logout']);

/** Where a member must go before any other page, or null. */
function secondFactorPage(s: PortalSession): string | null {
  if (!s.member) return null;
  if (s.mfaPending) return s.member.totp ? '/portal/signin/totp' : '/portal/account/totp';
  return s.requireTotp && !s.member.totp ? '/portal/account/totp' : null;
}

/** The security headers of every answer, and the session and CSRF checks before every page. */
function guardPages(app: FastifyInstance, portal: Portal) {
  const { ctx, layout, page } = portal;

  // The language and time zone of every portal answer (src/portal/i18n.ts).
  app.addHook('onRequest', async (req) => {
    req.i18n = localeOf({ lang: readCookie(req, LOCALE_COOKIE), tz: readCookie(req, TIME_ZONE_COOKIE) }, req.headers['accept-language']);
  });

  app.addHook('onSend', async (req, reply, payload) => {
    void reply.header('content-language', req.i18n.locale);
    void reply.header('vary', 'Accept-Language, Cookie');
    void reply.header('cache-control', 'no-store');
    void reply.header('x-content-type-options', 'nosniff');
    void reply.header('referrer-policy', 'same-origin'); // no-referrer would make browsers send Origin: null on form posts
    void reply.header('x-frame-options', 'DENY');
    void reply.header(
      'content-security-policy',
      "default-src 'none'; style-src 'self'; img-src 'self' data:; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
    );
    return payload;
  });

  // Every page but sign-in and the stylesheet needs a session whose key still passes; every
  // POST needs the session's CSRF token and, when the browser sends one, a same-origin Origin.
  app.addHook('preHandler', async (req, reply) => {
    const path = req.url.split('?')[0]!;
    if (req.method === 'POST' && !sameOrigin(req.headers.origin, req.headers.host)) {
      return page(reply, layout(req, common(req.i18n).refused, html`<p>${common(req.i18n).crossSite}</p>`), 403);
    }
    if (req.method === 'POST' && !postsAForm(req.headers['content-type'], req.body)) {
      return page(reply, layout(req, common(req.i18n).refused, html`<p>${common(req.i18n).notAForm}</p>`), 415);
    }
    if (PUBLIC_PATHS.has(path) || path.startsWith('/portal/assets/') || path.startsWith('/portal/invite/')) return;
    const loaded = await loadSession(ctx, req, portal.clientIp(req));
    if (typeof loaded === 'string') {
      if (loaded !== 'none') await endSession(ctx, reply, null);
      const why = loaded === 'none' ? '' : loaded;
      return reply.redirect(`/portal/login${why ? `?why=${why}` : ''}`, 303);
    }
    req.portal = loaded;
    // A member past the password but not yet the second factor (or required to set one up) opens
    // only the second-factor pages.
    const factorPage = secondFactorPage(loaded);
    if (factorPage && !SECOND_FACTOR_PATHS.has(path)) return reply.redirect(factorPage, 303);
    if (req.method === 'POST') {
      const form = (req.body ?? {}) as Form;
      if (typeof req.body !== 'object' || !csrfMatches(loaded, one(form, '_csrf'))) {
        return page(reply, layout(req, common(req.i18n).refused, html`<p>${common(req.i18n).csrf}</p>`), 403);
      }
    }
  });
}

/** A path of this portal to come back to: `/portal` or below, no scheme, no host, no backslash. */
export function portalReturnPath(next: unknown): string {
  if (typeof next !== 'string' || next.length > 1024 || !/^\/portal(?:[/?]|$)/.test(next) || /[\\\s]/.test(next) || next.includes('//')) return '/portal';
  return next;
}

const YEAR_SECONDS = 365 * 24 * 3600;

/**
 * The language switch (and the time-zone preference): `GET /portal/language?to=en&next=/portal/…`
 * sets the `pixgate_lang` cookie (`tz=America/Manaus` sets `pixgate_tz`) for a year and comes back
 * to `next`, a path of the portal. No session needed (the sign-in page has the switch too); an
 * unknown language or zone is ignored. Preferences only: nothing else depends on these cookies.
 */
function languageSwitch(app: FastifyInstance, tls: unknown) {
  app.get('/portal/language', async (req, reply) => {
    const q = req.query as Record<string, unknown>;
    const cookies: string[] = [];
    const attrs = `Path=/portal; SameSite=Lax; Max-Age=${YEAR_SECONDS}${tls ? '; Secure' : ''}`;
    if (isLocale(q.to)) cookies.push(`${LOCALE_COOKIE}=${q.to}; ${attrs}`);
    if (isTimeZone(q.tz)) cookies.push(`${TIME_ZONE_COOKIE}=${q.tz}; ${attrs}`);
    if (cookies.length) void reply.header('set-cookie', cookies);
    return reply.redirect(portalReturnPath(q.next), 303);
  });
}
