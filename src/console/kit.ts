import type { FastifyReply, FastifyRequest } from 'fastify';
import { operatorMay, type ConsoleCapability } from '../auth/operators.js';
import { totpUri } from '../auth/totp.js';
import type { AppContext } from '../context.js';
import { asHttpError } from '../http/errorMap.js';
import { html, type Html } from '../portal/html.js';
import { formatBrl, formatDateTime, type PortalLocale } from '../portal/i18n.js';
import type { ConsoleSession } from './session.js';

/** What every console page shares: the frame, its navigation by role, the form's hidden field, refusals. */
declare module 'fastify' {
  interface FastifyRequest {
    console: ConsoleSession | null;
  }
}

/** The console shows dates in America/Sao_Paulo (the institution's zone), in English. */
export const CONSOLE_LOCALE: PortalLocale = { locale: 'en', timeZone: 'America/Sao_Paulo' };
export const brl = (baseUnits: number | string | bigint | null | undefined) => (baseUnits === null || baseUnits === undefined ? '' : formatBrl(baseUnits));
export const at = (d: Date | string | null | undefined) => (d ? formatDateTime(d, CONSOLE_LOCALE) : '');

const NAV: { path: string; label: string; cap: ConsoleCapability }[] = [
  { path: '/console', label: 'Search', cap: 'read' },
  { path: '/console/webhooks', label: 'Webhooks', cap: 'read' },
  { path: '/console/med', label: 'MED queue', cap: 'read' },
  { path: '/console/audit', label: 'Audit log', cap: 'audit:read' },
  { path: '/console/operators', label: 'Operators', cap: 'operators:manage' },
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
export function refusalText(err: unknown): string {
  const e = asHttpError(err, 'operation');
  if (!e) return 'Something went wrong; nothing was changed.';
  const b = e.body as Record<string, unknown>;
  if (typeof b?.detail === 'string') return b.detail;
  if (typeof b?.message === 'string') return b.message;
  return `Refused (HTTP ${e.statusCode})`;
}

export function consoleKit(ctx: AppContext, setFlash: (s: ConsoleSession, kind: 'ok' | 'error', text: string) => Promise<void>): ConsoleKit {
  const layout = (req: FastifyRequest, title: string, body: Html, current = ''): string => {
    const s = req.console;
    const links = s ? NAV.filter((n) => operatorMay(s.operator.role, n.cap)) : [];
    return html`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>${title} · pixgate console</title><link rel="stylesheet" href="/console/assets/console.css"></head>
<body><a class="skip" href="#main">Skip to content</a>
<header><a class="brand" href="/console">pixgate · operator console</a>${
      s
        ? html`<span class="muted" data-testid="operator">${s.operator.username} · ${s.operator.role}</span>
<form method="post" action="/console/logout"><input type="hidden" name="_csrf" value="${s.csrf}"><button type="submit">Sign out</button></form>`
        : ''
    }</header>
${links.length ? html`<nav aria-label="Console">${links.map((n) => html`<a href="${n.path}"${n.path === current ? html` aria-current="page"` : ''}>${n.label}</a>`)}</nav>` : ''}
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
      void page(reply, layout(req, 'Not permitted', html`<p data-testid="refused">The role <b>${req.console!.operator.role}</b> may not do this (<code>${cap}</code>).</p>`), 403);
      return false;
    },
    flashAndBack: async (req, reply, kind, text, to) => {
      await setFlash(req.console!, kind, text);
      return reply.redirect(to, 303);
    },
  };
}

/** The TOTP enrolment shown once: the secret and its otpauth URI (to type or paste into an authenticator app). */
export function enrollment(username: string, secret: string, signInLink = true) {
  return html`<div class="card"><p>Add this second factor to an authenticator app now: it is shown once. The first sign-in with a code confirms it.</p>
<p class="label">Secret</p><p class="mono" data-testid="totp-secret">${secret}</p>
<p class="label">otpauth URI</p><p class="mono" data-testid="totp-uri">${totpUri(secret, username, 'pixgate console')}</p>
${signInLink ? html`<p><a class="button" href="/console/login">Go to sign-in</a></p>` : ''}</div>`;
}
