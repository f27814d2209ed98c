import type { FastifyReply, FastifyRequest } from 'fastify';
import type { Permission } from '../auth/permissions.js';
import type { Capability } from '../auth/roles.js';
import type { AppContext } from '../context.js';
import type { Sql } from '../db/db.js';
import { idempotencyScopePath } from '../external/stages/request.js';
import { resolveClientIp } from '../http/clientIp.js';
import { HttpError } from '../http/errors.js';
import { portalRefusal } from './refusal.js';
import { describeRefusal } from './errors.js';
import { one, type Form } from './formBody.js';
import { claimForm, completeForm, FORM_FIELD, isFormId, newFormId, recordedOutcome, recordOutcome, type FormOutcome } from './forms.js';
import { html, Html } from './html.js';
import { can, setFlash, type PortalSession } from './session.js';
import { LOCALES, type Locale, type PortalLocale } from './i18n.js';
import { common, statusLabel } from './messages.js';
import { teamText } from './pages/teamText.js';

/**
 * What every page of the portal shares (docs/portal.md): the page frame with its navigation, the
 * hidden fields of a form, the refusal of a missing permission, and the form action that runs once
 * per form id. Built once per app by `portalKit`; each page file takes it and registers its routes.
 */

declare module 'fastify' {
  interface FastifyRequest {
    portal: PortalSession | null;
    /** The request's language and time zone (src/portal/i18n.ts), set before every portal page. */
    i18n: PortalLocale;
  }
}

interface NavItem {
  path: string;
  label: 'navBalance' | 'navStatement' | 'navCharge' | 'navTef' | 'navWebhooks' | 'navMed' | 'navSandbox' | 'navKeys' | 'navTeam';
  /** The page opens with this permission, or with any of these. */
  permission: Capability | readonly Capability[];
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
  { path: '/portal/balance', label: 'navBalance', permission: 'account:read' },
  { path: '/portal/statement', label: 'navStatement', permission: 'statement:read' },
  { path: '/portal/charges', label: 'navCharge', permission: 'pix:write' },
  { path: '/portal/tef', label: 'navTef', permission: 'transfer:write' },
  { path: '/portal/webhooks', label: 'navWebhooks', permission: 'account:read' },
  { path: '/portal/med', label: 'navMed', permission: 'payment:read' },
  { path: '/portal/keys', label: 'navKeys', permission: 'keys:read' },
  { path: '/portal/team', label: 'navTeam', permission: ['members:read', 'account:write'] },
];

/** A status as a badge, named in the page's language (its class is the status itself). */
export function badge(status: string | null | undefined, where: PortalLocale): Html {
  return status ? html`<span class="badge ${status.toLowerCase()}" data-status="${status}">${statusLabel(status, where)}</span>` : html``;
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
  forbidden(req: FastifyRequest, reply: FastifyReply, permission: Capability): FastifyReply;
  clientIp(req: FastifyRequest): string;
  /** The session's key as the merchant API's principal. */
  principalOf(s: PortalSession): { clientId: string | null; merchantId: number; accountId: number; keyAccountId: number | null; permissions: readonly string[] };
  /**
   * Runs a form action once per form id (src/portal/forms.ts): the first post runs it, a repeat
   * gets the first outcome. The outcome is shown on the page it redirects to (`back` by default).
   */
  action(req: FastifyRequest, reply: FastifyReply, back: string, run: (form: FormRun) => Promise<ActionDone>, labels?: Record<string, string>): Promise<FastifyReply>;
}

const LANGUAGE_NAMES: Record<Locale, string> = { 'pt-BR': 'Português', en: 'English' };

/**
 * The language switch: a link per language to /portal/language (which sets the cookie and comes
 * back to this page), each named in its own language; the current one marked.
 */
function languageSwitch(req: FastifyRequest): Html {
  const back = req.url.length <= 1024 && req.method === 'GET' ? req.url : '/portal';
  return html`<span class="lang" role="group" aria-label="${common(req.i18n).language}">${LOCALES.map(
    (l) =>
      html`<a href="/portal/language?to=${l}&amp;next=${encodeURIComponent(back)}" lang="${l}" hreflang="${l}"${l === req.i18n.locale ? html` aria-current="true"` : ''}>${LANGUAGE_NAMES[l]}</a>`,
  )}</span>`;
}

/** The zones of Brazil (and UTC) offered by the footer's time-zone switch. */
export const BRAZIL_ZONES = [
  'America/Sao_Paulo', 'America/Bahia', 'America/Fortaleza', 'America/Recife', 'America/Belem', 'America/Manaus', 'America/Cuiaba',
  'America/Porto_Velho', 'America/Boa_Vista', 'America/Rio_Branco', 'America/Noronha', 'UTC',
] as const;

/** The footer: which zone the page's times are in, and a GET form to choose another (/portal/language?tz=…). */
function zoneSwitch(req: FastifyRequest): Html {
  const m = common(req.i18n);
  const back = req.url.length <= 1024 && req.method === 'GET' ? req.url : '/portal';
  const zones: readonly string[] = BRAZIL_ZONES.includes(req.i18n.timeZone as (typeof BRAZIL_ZONES)[number]) ? BRAZIL_ZONES : [req.i18n.timeZone, ...BRAZIL_ZONES];
  return html`<form class="zone" method="get" action="/portal/language"><input type="hidden" name="next" value="${back}"><label>${m.timesIn('')}<select name="tz" data-testid="tz">${zones.map(
    (z) => html`<option${z === req.i18n.timeZone ? html` selected` : ''}>${z}</option>`,
  )}</select></label> <button type="submit" class="secondary">${m.change}</button></form>`;
}

/** The portal's shared parts; `withSandbox` adds the sandbox panel to the navigation. */
export function portalKit(ctx: AppContext, withSandbox: boolean): Portal {
  const nav: NavItem[] = withSandbox ? [...NAV, { path: '/portal/sandbox', label: 'navSandbox', permission: SANDBOX_PERMISSIONS }] : NAV;
  const opens = (s: PortalSession, n: NavItem) => (typeof n.permission === 'string' ? can(s, n.permission) : n.permission.some((p) => can(s, p)));

  const layout = (req: FastifyRequest, title: string, body: Html, current = ''): string => {
    const s = req.portal;
    const m = common(req.i18n);
    const links = s ? nav.filter((n) => opens(s, n)) : [];
    return html`<!doctype html>
<html lang="${req.i18n.locale}"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>${m.pageTitle(title)}</title><link rel="stylesheet" href="/portal/assets/portal.css"></head>
<body><a class="skip" href="#main">${m.skip}</a>
<header><a class="brand" href="/portal">${m.brand}</a>${languageSwitch(req)}${
      s
        ? html`<span class="muted mono who" title="${s.member ? s.member.role : m.apiKey}">${s.member ? s.member.email : s.key.client_id} · ${m.account(s.accountId)}</span>
<form method="post" action="/portal/logout"><input type="hidden" name="_csrf" value="${s.csrf}"><button type="submit">${m.signOut}</button></form>`
        : ''
    }</header>
${links.length ? html`<nav aria-label="Portal">${links.map((n) => html`<a href="${n.path}"${n.path === current ? html` aria-current="page"` : ''}>${m[n.label]}</a>`)}</nav>` : ''}
<main id="main">${s?.flash ? html`<div class="flash ${s.flash.kind}" role="${s.flash.kind === 'error' ? 'alert' : 'status'}">${s.flash.text}</div>` : ''}
<h1>${title}</h1>${body}</main><footer class="muted no-print">${zoneSwitch(req)}</footer></body></html>`.text;
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
      page(
        reply,
        layout(
          req,
          common(req.i18n).notPermitted,
          html`<p>${req.portal?.member ? teamText(req.i18n).notPermittedRole(teamText(req.i18n).roleName(req.portal.member.role), permission) : common(req.i18n).notPermittedText(permission)}</p>`,
        ),
        403,
      ),
    clientIp: (req) => resolveClientIp(req.socket.remoteAddress ?? '', req.headers['x-forwarded-for'], ctx.config.trustedProxies),
    principalOf: (s) => ({
      clientId: s.key.client_id,
      merchantId: s.key.merchant_id,
      accountId: s.accountId,
      keyAccountId: s.key.account_id,
      permissions: s.key.permissions,
    }),
    action: (req, reply, back, run, labels = {}) => runAction(portal, req, reply, back, run, labels),
  };
  return portal;
}

/** Form fields never kept to refill a form after a refusal: the tokens, and anything secret. */
const NOT_KEPT = /^_|secret|password|totp|otp|code$/i;

/** What was typed in a posted form, to show it again after a refusal (secrets and tokens left out). */
export function keptValues(body: unknown): Record<string, string | string[]> {
  const out: Record<string, string | string[]> = {};
  if (!body || typeof body !== 'object') return out;
  for (const [k, v] of Object.entries(body as Form)) if (!NOT_KEPT.test(k)) out[k] = v;
  return out;
}

/**
 * Portal.action: claim the form id, run (or replay), log it, flash the outcome and redirect. A
 * refusal's flash carries its field errors (`labels` names the fields in its summary) and what was
 * typed, so the form comes back filled in.
 */
async function runAction(portal: Portal, req: FastifyRequest, reply: FastifyReply, back: string, run: (form: FormRun) => Promise<ActionDone>, labels: Record<string, string>) {
  const { ctx, page, layout } = portal;
  const s = req.portal!;
  const formId = one(req.body as Form, FORM_FIELD);
  if (!isFormId(formId)) {
    return page(reply, layout(req, common(req.i18n).refused, html`<p>${common(req.i18n).noFormId}</p>`), 400);
  }
  const scopePath = idempotencyScopePath(req);
  const claimed = await claimForm(ctx.idempotency, { merchantId: s.key.merchant_id, method: 'POST', path: scopePath, key: formId });
  if (claimed.kind === 'busy') {
    return page(reply, layout(req, common(req.i18n).stillRunning, html`<p>${common(req.i18n).stillRunningText}</p>`), 409);
  }
  const refusal = (err: unknown): FormOutcome => {
    const r = describeRefusal(err, req.i18n, labels);
    return r ? { kind: 'error', text: r.text, redirect: back, ...(Object.keys(r.fields).length ? { fields: { ...r.fields } } : {}) } : { kind: 'error', text: common(req.i18n).somethingWrong, redirect: back };
  };
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
  const path = req.url.split('?')[0]!;
  await setFlash(ctx.db, s, outcome.kind, outcome.text, outcome.kind === 'error' ? { form: path, values: keptValues(req.body), ...(outcome.fields ? { fields: outcome.fields } : {}) } : {});
  return reply.redirect(outcome.redirect, 303);
}
