import type { FastifyReply, FastifyRequest } from 'fastify';
import type { Permission } from '../auth/permissions.js';
import type { AppContext } from '../context.js';
import type { Sql } from '../db/db.js';
import { idempotencyScopePath } from '../external/stages/request.js';
import { resolveClientIp } from '../http/clientIp.js';
import { HttpError } from '../http/errors.js';
import { portalRefusal } from './refusal.js';
import { one, type Form } from './formBody.js';
import { claimForm, completeForm, FORM_FIELD, isFormId, newFormId, recordedOutcome, recordOutcome, type FormOutcome } from './forms.js';
import { html, Html } from './html.js';
import { can, setFlash, type PortalSession } from './session.js';

/**
 * What every page of the portal shares (docs/portal.md): the page frame with its navigation, the
 * hidden fields of a form, the refusal of a missing permission, and the form action that runs once
 * per form id. Built once per app by `portalKit`; each page file takes it and registers its routes.
 */

declare module 'fastify' {
  interface FastifyRequest {
    portal: PortalSession | null;
  }
}

interface NavItem {
  path: string;
  label: string;
  /** The page opens with this permission, or with any of these. */
  permission: Permission | readonly Permission[];
}

/**
 * The sandbox panel's simulations and the permission each needs: the permission of the merchant
 * API flow whose other side it plays (docs/portal.md). Receiving a PIX and paying a charge are
 * cash-in (`pix:write`); deciding a held payout acts on a cash-out (`transfer:write`); opening and
 * resolving an infraction act on MED funds (`payment:write`).
 */
export const SANDBOX_PERMISSION = {
  inbound: 'pix:write',
  pay: 'pix:write',
  infraction: 'payment:write',
  resolve: 'payment:write',
  payout: 'transfer:write',
} as const satisfies Record<string, Permission>;
export type SandboxForm = keyof typeof SANDBOX_PERMISSION;
export const SANDBOX_PERMISSIONS = [...new Set(Object.values(SANDBOX_PERMISSION))];

const NAV: NavItem[] = [
  { path: '/portal/balance', label: 'Balance', permission: 'account:read' },
  { path: '/portal/statement', label: 'Statement', permission: 'statement:read' },
  { path: '/portal/charges', label: 'Charge', permission: 'pix:write' },
  { path: '/portal/tef', label: 'Transfer (TEF)', permission: 'transfer:write' },
  { path: '/portal/webhooks', label: 'Webhooks', permission: 'account:read' },
  { path: '/portal/med', label: 'MED', permission: 'payment:read' },
];

export function badge(status: string | null | undefined): Html {
  return status ? html`<span class="badge ${status}">${status}</span>` : html``;
}

/** What an error answer of a domain function says, for a person. */
export function errorText(error: unknown): string {
  const err = portalRefusal(error);
  if (!err) return 'Something went wrong; nothing was changed. Try again.';
  const b = err.body as Record<string, unknown> | string;
  if (typeof b === 'string') return b;
  if (typeof b.detail === 'string') return b.detail;
  if (b.errors && typeof b.errors === 'object') {
    return Object.entries(b.errors as Record<string, unknown>)
      .map(([k, v]) =>
        typeof v === 'string'
          ? v
          : v && typeof v === 'object'
            ? Object.entries(v as Record<string, unknown>).map(([f, m]) => `${f} ${Array.isArray(m) ? m.join(', ') : String(m)}`).join('; ')
            : k,
      )
      .join('; ');
  }
  const e = b.error as { message?: string } | string | undefined;
  if (typeof e === 'object' && e?.message) return e.message;
  if (typeof b.message === 'string') return b.message;
  return `Refused (HTTP ${err.statusCode})`;
}

/** What a form action gets to record its outcome in its operation's own transaction. */
export interface FormRun {
  record(tx: Sql, outcome: FormOutcome): Promise<void>;
  /** A success shown on `redirect` (default: the form's page)… */
  ok(message: string, redirect?: string): FormOutcome;
  /** …or the refusal an error answer (status, body) says. */
  refused(statusCode: number, body: unknown): FormOutcome;
}

/** A form action's success: its message, shown on the form's page or on the page named. */
export type ActionDone = string | { redirect: string; message: string };

/** The shared parts of the portal's pages. */
export interface Portal {
  ctx: AppContext;
  /** The first page this session may open (the home page's redirect). */
  firstPage(s: PortalSession): string | undefined;
  /** A whole page: the frame, its navigation (`current` marked), the flash message and `body`. */
  layout(req: FastifyRequest, title: string, body: Html, current?: string): string;
  /** The hidden fields of every form: the session's CSRF token and a new one-time form id. */
  csrfField(req: FastifyRequest): Html;
  page(reply: FastifyReply, text: string, status?: number): FastifyReply;
  forbidden(req: FastifyRequest, reply: FastifyReply, permission: Permission): FastifyReply;
  clientIp(req: FastifyRequest): string;
  /** The session's key as the merchant API's principal. */
  principalOf(s: PortalSession): { clientId: string; merchantId: number; accountId: number; keyAccountId: number | null; permissions: readonly string[] };
  /**
   * Runs a form action once per form id (src/portal/forms.ts): the first post runs it, a repeat
   * gets the first outcome. The outcome is shown on the page it redirects to (`back` by default).
   */
  action(req: FastifyRequest, reply: FastifyReply, back: string, run: (form: FormRun) => Promise<ActionDone>): Promise<FastifyReply>;
}

/** The portal's shared parts; `withSandbox` adds the sandbox panel to the navigation. */
export function portalKit(ctx: AppContext, withSandbox: boolean): Portal {
  const nav: NavItem[] = withSandbox ? [...NAV, { path: '/portal/sandbox', label: 'Sandbox', permission: SANDBOX_PERMISSIONS }] : NAV;
  const opens = (s: PortalSession, n: NavItem) => (typeof n.permission === 'string' ? can(s, n.permission) : n.permission.some((p) => can(s, p)));

  const layout = (req: FastifyRequest, title: string, body: Html, current = ''): string => {
    const s = req.portal;
    const links = s ? nav.filter((n) => opens(s, n)) : [];
    return html`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>${title} · pixgate portal</title><link rel="stylesheet" href="/portal/assets/portal.css"></head>
<body><a class="skip" href="#main">Skip to content</a>
<header><a class="brand" href="/portal">pixgate · merchant portal</a>${
      s
        ? html`<span class="muted mono" title="API key">${s.key.client_id} · account ${s.accountId}</span>
<form method="post" action="/portal/logout"><input type="hidden" name="_csrf" value="${s.csrf}"><button type="submit">Sign out</button></form>`
        : ''
    }</header>
${links.length ? html`<nav aria-label="Portal">${links.map((n) => html`<a href="${n.path}"${n.path === current ? html` aria-current="page"` : ''}>${n.label}</a>`)}</nav>` : ''}
<main id="main">${s?.flash ? html`<div class="flash ${s.flash.kind}" role="${s.flash.kind === 'error' ? 'alert' : 'status'}">${s.flash.text}</div>` : ''}
<h1>${title}</h1>${body}</main></body></html>`.text;
  };

  const page = (reply: FastifyReply, text: string, status = 200) => reply.code(status).type('text/html; charset=utf-8').send(text);

  const portal: Portal = {
    ctx,
    firstPage: (s) => nav.find((n) => opens(s, n))?.path,
    layout,
    csrfField: (req) =>
      html`<input type="hidden" name="_csrf" value="${req.portal!.csrf}"><input type="hidden" name="${FORM_FIELD}" value="${newFormId()}">`,
    page,
    forbidden: (req, reply, permission) =>
      page(reply, layout(req, 'Not permitted', html`<p>This API key does not have the permission <code>${permission}</code>.</p>`), 403),
    clientIp: (req) => resolveClientIp(req.socket.remoteAddress ?? '', req.headers['x-forwarded-for'], ctx.config.trustedProxies),
    principalOf: (s) => ({
      clientId: s.key.client_id,
      merchantId: s.key.merchant_id,
      accountId: s.accountId,
      keyAccountId: s.key.account_id,
      permissions: s.key.permissions,
    }),
    action: (req, reply, back, run) => runAction(portal, req, reply, back, run),
  };
  return portal;
}

/** Portal.action: claim the form id, run (or replay), log it, flash the outcome and redirect. */
async function runAction(portal: Portal, req: FastifyRequest, reply: FastifyReply, back: string, run: (form: FormRun) => Promise<ActionDone>) {
  const { ctx, page, layout } = portal;
  const s = req.portal!;
  const formId = one(req.body as Form, FORM_FIELD);
  if (!isFormId(formId)) {
    return page(reply, layout(req, 'Refused', html`<p>The form was out of date (it carries no one-time id). Go back, reload the page and try again.</p>`), 400);
  }
  const scopePath = idempotencyScopePath(req);
  const claimed = await claimForm(ctx.idempotency, { merchantId: s.key.merchant_id, method: 'POST', path: scopePath, key: formId });
  if (claimed.kind === 'busy') {
    return page(reply, layout(req, 'Still running', html`<p>This form is still being processed. Look at the statement before sending it again.</p>`), 409);
  }
  const refusal = (err: unknown): FormOutcome => ({ kind: 'error', text: errorText(err), redirect: back });
  let outcome: FormOutcome;
  if (claimed.kind === 'replay') {
    outcome = claimed.outcome;
  } else {
    const { claim } = claimed;
    const form: FormRun = {
      record: (tx, o) => recordOutcome(claim, tx, o),
      ok: (message, redirect = back) => ({ kind: 'ok', text: message, redirect }),
      refused: (statusCode, body) => refusal(new HttpError(statusCode, body)),
    };
    try {
      const result = await run(form);
      outcome = recordedOutcome(claim) ?? (typeof result === 'string' ? form.ok(result) : form.ok(result.message, result.redirect));
      if (!claim.recorded) await completeForm(ctx.idempotency, claim, outcome);
    } catch (err) {
      const recorded = recordedOutcome(claim);
      if (recorded) {
        outcome = recorded; // the operation committed with this outcome
      } else if ((portalRefusal(err)?.statusCode ?? 500) < 500) {
        outcome = refusal(err); // a refusal is the form's outcome: a repeat gets it too
        await completeForm(ctx.idempotency, claim, outcome);
      } else {
        // Not known to be final (a fault): the form may be sent again and run then.
        req.log.error({ err }, 'portal action failed');
        outcome = refusal(err);
        await ctx.idempotency.release(claim);
      }
    }
  }
  // The merchant's action, by its key (the portal's own audit trail: the request log).
  req.log.info(
    { portal_action: scopePath, client_id: s.key.client_id, merchant_id: s.key.merchant_id, account_id: s.accountId, outcome: outcome.kind, repeat: claimed.kind === 'replay' },
    'portal action',
  );
  await setFlash(ctx.db, s, outcome.kind, outcome.text);
  return reply.redirect(outcome.redirect, 303);
}
