import type { FastifyReply, FastifyRequest } from 'fastify';
import { operatorMay, type ConsoleCapability } from '../auth/operators.js';
import { totpUri } from '../auth/totp.js';
import type { AppContext } from '../context.js';
import { asHttpError } from '../http/errorMap.js';
import { html, type Html } from '../portal/html.js';
import { formatBrl, formatDateTime, LOCALE_COOKIE, localeOf, type PortalLocale } from '../portal/i18n.js';
import { readCookie } from '../portal/session.js';
import { CM } from './messages.js';
import type { ConsoleSession } from './session.js';

/** What every console page shares: the frame, its navigation by role, the form's hidden field, refusals. */
declare module 'fastify' {
  interface FastifyRequest {
    console: ConsoleSession | null;
    consoleLocale: PortalLocale | null;
  }
}

/** CSV exports and fixed texts use this: dates in America/Sao_Paulo (the institution's zone). */
export const CONSOLE_LOCALE: PortalLocale = { locale: 'en', timeZone: 'America/Sao_Paulo' };
export const brl = (baseUnits: number | string | bigint | null | undefined) => (baseUnits === null || baseUnits === undefined ? '' : formatBrl(baseUnits));

/**
 * The language of a console request, as the merchant portal chooses it (the `pixgate_lang` cookie,
 * else Accept-Language, else pt-BR); dates always in America/Sao_Paulo, the institution's zone.
 */
export function localeOfRequest(req: FastifyRequest): PortalLocale {
  if (req.consoleLocale) return req.consoleLocale;
  const l = localeOf({ lang: readCookie(req, LOCALE_COOKIE) }, req.headers['accept-language']);
  req.consoleLocale = { locale: l.locale, timeZone: 'America/Sao_Paulo' };
  return req.consoleLocale;
}

/** A request's locale and its date formatter: `const { L, at } = lang(req)`. */
export function lang(req: FastifyRequest) {
  const L = localeOfRequest(req);
  return { L, at: (d: Date | string | null | undefined) => (d ? formatDateTime(d, L) : '') };
}

type NavLabel = 'navSearch' | 'navWebhooks' | 'navMed' | 'navAudit' | 'navOperators' | 'navSimulator';
const NAV: { path: string; label: NavLabel; cap: ConsoleCapability }[] = [
  { path: '/console', label: 'navSearch', cap: 'read' },
  { path: '/console/webhooks', label: 'navWebhooks', cap: 'read' },
  { path: '/console/med', label: 'navMed', cap: 'read' },
  { path: '/console/audit', label: 'navAudit', cap: 'audit:read' },
  { path: '/console/operators', label: 'navOperators', cap: 'operators:manage' },
];

export interface ConsoleKit {
  ctx: AppContext;
  layout(req: FastifyRequest, title: string, body: Html, current?: string): string;
  page(reply: FastifyReply, text: string, status?: number): FastifyReply;
  csrf(req: FastifyRequest): Html;
  /** The capability check of a page or action: true when allowed; otherwise it answered 403. */
  allow(req: FastifyRequest, reply: FastifyReply, cap: ConsoleCapability): boolean;
  flashAndBack(req: FastifyRequest, reply: FastifyReply, kind: 'ok' | 'error', text: string, to: string): Promise<FastifyReply>;
}

/** A refusal's message for a person (a fault says nothing of its cause). */
export function refusalText(err: unknown, where: PortalLocale = CONSOLE_LOCALE): string {
  const e = asHttpError(err, 'operation');
  if (!e) return CM(where).fault;
  const b = e.body as Record<string, unknown>;
  if (typeof b?.detail === 'string') return b.detail;
  if (typeof b?.message === 'string') return b.message;
  return CM(where).refusedStatus(e.statusCode);
}

export function consoleKit(ctx: AppContext, showSimulator: boolean, setFlash: (s: ConsoleSession, kind: 'ok' | 'error', text: string) => Promise<void>): ConsoleKit {
  const layout = (req: FastifyRequest, title: string, body: Html, current = ''): string => {
    const s = req.console;
    const L = localeOfRequest(req);
    const t = CM(L);
    const nav = showSimulator ? [...NAV, { path: '/console/simulator', label: 'navSimulator' as const, cap: 'rail:simulate' as const }] : NAV;
    const links = s ? nav.filter((n) => operatorMay(s.operator.role, n.cap)) : [];
    const other = L.locale === 'en' ? 'pt-BR' : 'en';
    const path = req.url.split('?')[0]!;
    return html`<!doctype html>
<html lang="${L.locale}"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>${title} · pixgate console</title><link rel="stylesheet" href="/console/assets/console.css"></head>
<body><a class="skip" href="#main">${t.skip}</a>
<header><a class="brand" href="/console">${t.brand}</a> <a href="/console/language?to=${other}&next=${encodeURIComponent(path)}" lang="${other}" data-testid="language">${t.otherLanguage}</a>${
      s
        ? html`<span class="muted" data-testid="operator">${s.operator.username} · ${s.operator.role}</span>
<form method="post" action="/console/logout"><input type="hidden" name="_csrf" value="${s.csrf}"><button type="submit">${t.signOut}</button></form>`
        : ''
    }</header>
${links.length ? html`<nav aria-label="${t.navLabel}">${links.map((n) => html`<a href="${n.path}"${n.path === current ? html` aria-current="page"` : ''}>${t[n.label]}</a>`)}</nav>` : ''}
<main id="main">${s?.flash ? html`<div class="flash ${s.flash.kind}" role="${s.flash.kind === 'error' ? 'alert' : 'status'}">${s.flash.text}</div>` : ''}
<h1>${title}</h1>${body}</main></body></html>`.text;
  };
  const page = (reply: FastifyReply, text: string, status = 200) => reply.code(status).type('text/html; charset=utf-8').send(text);
  return {
    ctx,
    layout,
    page,
    csrf: (req) => html`<input type="hidden" name="_csrf" value="${req.console!.csrf}">`,
    allow: (req, reply, cap) => {
      if (operatorMay(req.console!.operator.role, cap)) return true;
      const t = CM(localeOfRequest(req));
      void page(reply, layout(req, t.notPermitted, html`<p data-testid="refused">${t.roleMayNot(req.console!.operator.role)} (<code>${cap}</code>).</p>`), 403);
      return false;
    },
    flashAndBack: async (req, reply, kind, text, to) => {
      await setFlash(req.console!, kind, text);
      return reply.redirect(to, 303);
    },
  };
}

/** The TOTP enrolment shown once: the secret and its otpauth URI (to type or paste into an authenticator app). */
export function enrollment(L: PortalLocale, username: string, secret: string, signInLink = true) {
  const t = CM(L);
  return html`<div class="card"><p>${t.enrolNow}</p>
<p class="label">${t.secret}</p><p class="mono" data-testid="totp-secret">${secret}</p>
<p class="label">${t.otpUri}</p><p class="mono" data-testid="totp-uri">${totpUri(secret, username, 'pixgate console')}</p>
${signInLink ? html`<p><a class="button" href="/console/login">${t.goSignIn}</a></p>` : ''}</div>`;
}
