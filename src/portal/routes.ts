import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { authenticate } from '../auth/credentials.js';
import { whitelistAllows } from '../auth/ipWhitelist.js';
import type { Permission } from '../auth/permissions.js';
import type { AppContext } from '../context.js';
import type { Sql } from '../db/db.js';
import { EVENT_CATALOG } from '../events/catalog.js';
import { idempotencyScopePath } from '../external/pipeline.js';
import { resolveClientIp } from '../http/clientIp.js';
import { HttpError } from '../http/errors.js';
import { portalRefusal } from './refusal.js';
import { parseOrThrow } from '../http/validation.js';
import { readBalances } from '../ledger/ledger.js';
import { isoZ } from '../lib/clock.js';
import { getInfraction, infractionId, listInfractions, submitDefense } from '../med/merchant.js';
import { parseDefense } from '../med/routes.js';
import { createCharge } from '../pix/cashin/charges.js';
import { parseChargeCommand } from '../pix/cashin/charges.routes.js';
import { qrCodeDataUrl } from '../pix/cashin/qrImage.js';
import { decidePayout, openInfraction, receiveInbound, resolveInfraction, returnPayout, simulator } from '../sandbox/actions.js';
import { payBrCode } from '../sandbox/payerBank.js';
import { inbound, pay, report, resolve, returnBody } from '../sandbox/sandbox.api.js';
import { parseTef, transfer, type TefResponse } from '../tef/tef.js';
import { parseListParams } from '../transactions/routes.js';
import { lookup, statement, transactionReceipt } from '../transactions/statement.js';
import { listView } from '../webhooks/registration.js';
import * as webhookRepo from '../webhooks/repository.js';
import { createWebhook, deleteWebhook, resendDelivery, sendTestEvent } from '../webhooks/service.js';
import { claimForm, completeForm, FORM_FIELD, isFormId, newFormId, recordedOutcome, recordOutcome, type FormOutcome } from './forms.js';
import { brl, html, Html, parseReais, PORTAL_CSS, when } from './html.js';
import { can, createSession, csrfMatches, endSession, loadSession, setFlash, type PortalSession } from './session.js';

/**
 * The merchant portal at /portal (docs/portal.md): server-rendered pages over the same domain
 * functions the merchant API calls, signed in with an API key. No JavaScript, no external assets.
 */

/** The spec's limit for merchant authentication endpoints: sign-in attempts per minute per address. */
export const PORTAL_SIGN_IN_PER_MINUTE = 5;
const FORM_LIMIT_BYTES = 64 * 1024;

type Form = Record<string, string | string[]>;

/** What a form action gets to record its outcome in its operation's own transaction. */
interface FormRun {
  record(tx: Sql, outcome: FormOutcome): Promise<void>;
  /** A success shown on `redirect` (default: the form's page)… */
  ok(message: string, redirect?: string): FormOutcome;
  /** …or the refusal an error answer (status, body) says. */
  refused(statusCode: number, body: unknown): FormOutcome;
}

declare module 'fastify' {
  interface FastifyRequest {
    portal: PortalSession | null;
  }
}

/** A form body as a null-prototype map (repeated names become arrays). */
function parseForm(text: string): Form {
  const out = Object.create(null) as Form;
  for (const [k, v] of new URLSearchParams(text)) {
    const prev = out[k];
    out[k] = prev === undefined ? v : Array.isArray(prev) ? [...prev, v] : [prev, v];
  }
  return out;
}

const one = (f: Form, name: string): string | undefined => {
  const v = f[name];
  return Array.isArray(v) ? v[0] : v;
};
const many = (f: Form, name: string): string[] => {
  const v = f[name];
  return v === undefined ? [] : Array.isArray(v) ? v : [v];
};
/** A form's optional text: absent or blank → undefined. */
const opt = (f: Form, name: string): string | undefined => {
  const v = one(f, name)?.trim();
  return v ? v : undefined;
};

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
const SANDBOX_PERMISSION = {
  inbound: 'pix:write',
  pay: 'pix:write',
  infraction: 'payment:write',
  resolve: 'payment:write',
  payout: 'transfer:write',
} as const satisfies Record<string, Permission>;
type SandboxForm = keyof typeof SANDBOX_PERMISSION;
const SANDBOX_PERMISSIONS = [...new Set(Object.values(SANDBOX_PERMISSION))];

const NAV: NavItem[] = [
  { path: '/portal/balance', label: 'Balance', permission: 'account:read' },
  { path: '/portal/statement', label: 'Statement', permission: 'statement:read' },
  { path: '/portal/charges', label: 'Charge', permission: 'pix:write' },
  { path: '/portal/tef', label: 'Transfer (TEF)', permission: 'transfer:write' },
  { path: '/portal/webhooks', label: 'Webhooks', permission: 'account:read' },
  { path: '/portal/med', label: 'MED', permission: 'payment:read' },
];

function badge(status: string | null | undefined): Html {
  return status ? html`<span class="badge ${status}">${status}</span>` : html``;
}

export function portalRoutes(ctx: AppContext) {
  const sim = ctx.config.appEnv === 'production' ? null : simulator(ctx);
  const nav: NavItem[] = sim ? [...NAV, { path: '/portal/sandbox', label: 'Sandbox', permission: SANDBOX_PERMISSIONS }] : NAV;
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

  /** The hidden fields of every form: the session's CSRF token and a new one-time form id. */
  const csrfField = (req: FastifyRequest) =>
    html`<input type="hidden" name="_csrf" value="${req.portal!.csrf}"><input type="hidden" name="${FORM_FIELD}" value="${newFormId()}">`;

  const page = (reply: FastifyReply, text: string, status = 200) => reply.code(status).type('text/html; charset=utf-8').send(text);

  const clientIp = (req: FastifyRequest) => resolveClientIp(req.socket.remoteAddress ?? '', req.headers['x-forwarded-for'], ctx.config.trustedProxies);

  const principalOf = (s: PortalSession) => ({
    clientId: s.key.client_id,
    merchantId: s.key.merchant_id,
    accountId: s.accountId,
    keyAccountId: s.key.account_id,
    permissions: s.key.permissions,
  });

  /**
   * Runs a form action once per form id (src/portal/forms.ts): the first post runs it, a repeat
   * gets the first outcome. The outcome is shown on the page it redirects to.
   */
  const action = async (req: FastifyRequest, reply: FastifyReply, back: string, run: (form: FormRun) => Promise<string | { redirect: string; message: string }>) => {
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
  };

  const forbidden = (req: FastifyRequest, reply: FastifyReply, permission: Permission) =>
    page(reply, layout(req, 'Not permitted', html`<p>This API key does not have the permission <code>${permission}</code>.</p>`), 403);

  return async function plugin(app: FastifyInstance) {
    app.decorateRequest('portal', null);
    app.addContentTypeParser('application/x-www-form-urlencoded', { parseAs: 'string', bodyLimit: FORM_LIMIT_BYTES }, (_req, body, done) =>
      done(null, parseForm(body as string)),
    );

    app.addHook('onSend', async (_req, reply, payload) => {
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
        return page(reply, layout(req, 'Refused', html`<p>Cross-site form submissions are refused.</p>`), 403);
      }
      if (path === '/portal/login' || path.startsWith('/portal/assets/')) return;
      const loaded = await loadSession(ctx, req, clientIp(req));
      if (typeof loaded === 'string') {
        if (loaded !== 'none') await endSession(ctx, reply, null);
        const why = loaded === 'none' ? '' : loaded;
        return reply.redirect(`/portal/login${why ? `?why=${why}` : ''}`, 303);
      }
      req.portal = loaded;
      if (req.method === 'POST') {
        const form = (req.body ?? {}) as Form;
        if (typeof req.body !== 'object' || !csrfMatches(loaded, one(form, '_csrf'))) {
          return page(reply, layout(req, 'Refused', html`<p>The form was out of date or not sent from this portal (CSRF check). Go back, reload and try again.</p>`), 403);
        }
      }
    });

    app.get('/portal/assets/portal.css', async (_req, reply) => reply.type('text/css; charset=utf-8').header('cache-control', 'public, max-age=3600').send(PORTAL_CSS));

    // ---- sign-in ----

    const WHY: Record<string, string> = {
      expired: 'Your session expired; sign in again.',
      key: 'The API key of your session is no longer valid.',
      ip: 'Your address is not in the API key’s IP whitelist.',
      inactive: 'The account is not active.',
    };
    const loginPage = (req: FastifyRequest, message: string | null) =>
      layout(
        req,
        'Sign in',
        html`<div class="card login">
${message ? html`<div class="flash error" role="alert">${message}</div>` : ''}
<form class="stack" method="post" action="/portal/login">
<label>Client ID <input name="client_id" autocomplete="username" required maxlength="100" spellcheck="false"></label>
<label>Client secret <input name="client_secret" type="password" autocomplete="current-password" required maxlength="200"></label>
<button type="submit">Sign in</button></form>
<p class="muted">Use an API key of your account. Its IP whitelist and permissions apply here as in the API.</p></div>`,
      );

    app.get('/portal/login', async (req, reply) => {
      const why = (req.query as Record<string, string>).why;
      return page(reply, loginPage(req, why ? (WHY[why] ?? null) : null));
    });

    app.post('/portal/login', async (req, reply) => {
      const ip = clientIp(req);
      try {
        const hit = await ctx.rateCounter.hit(`portal-sign-in:${ip}`, PORTAL_SIGN_IN_PER_MINUTE, 60);
        if (!hit.allowed) {
          void reply.header('retry-after', String(hit.retryAfter));
          return page(reply, loginPage(req, 'Too many sign-in attempts from your address. Wait a minute and try again.'), 429);
        }
      } catch (err) {
        req.log.warn({ err: (err as Error).message }, 'portal sign-in limiter unavailable');
      }
      const form = (typeof req.body === 'object' && req.body ? req.body : {}) as Form;
      const id = one(form, 'client_id')?.trim() ?? '';
      const secret = one(form, 'client_secret') ?? '';
      const result = await authenticate((id) => ctx.credentials.apiKey(ctx.db, id), ctx.clock, id && secret ? `ApiKey ${id}:${secret}` : undefined);
      if (!('key' in result)) return page(reply, loginPage(req, 'Wrong client ID or secret, or the key is revoked or expired.'), 401);
      const { key } = result;
      if (key.ip_whitelist.length === 0 || !whitelistAllows(key.ip_whitelist, ip)) return page(reply, loginPage(req, WHY.ip!), 403);
      if (key.operating_account_id === null || key.account_status !== 'active' || key.merchant_status !== 'active') return page(reply, loginPage(req, WHY.inactive!), 403);
      await createSession(ctx, reply, key.client_id);
      return reply.redirect('/portal', 303);
    });

    app.post('/portal/logout', async (req, reply) => {
      await endSession(ctx, reply, req.portal);
      return reply.redirect('/portal/login', 303);
    });

    const home = async (req: FastifyRequest, reply: FastifyReply) => {
      const first = nav.find((n) => opens(req.portal!, n));
      return reply.redirect(first?.path ?? '/portal/balance', 303); // none: the balance page says which permission is missing
    };
    app.get('/portal', home);
    app.get('/portal/', home);

    // ---- balance ----

    app.get('/portal/balance', async (req, reply) => {
      const s = req.portal!;
      if (!can(s, 'account:read')) return forbidden(req, reply, 'account:read');
      const b = await readBalances(ctx.db, s.accountId);
      const figure = (label: string, value: number, note: string) =>
        html`<div class="card"><div class="label">${label}</div><div class="figure" data-testid="${label.toLowerCase()}">${brl(value)}</div><div class="muted">${note}</div></div>`;
      return page(
        reply,
        layout(
          req,
          'Balance',
          html`<div class="grid">
${figure('Available', b.available, 'What you can send now')}
${figure('Blocked', b.blocked, 'Precautionary MED blocks')}
${figure('Pending', b.pending, 'Reserved for payments in flight')}
</div><p class="muted">Total held for you: ${brl(b.ledgerTotal)} · safe balance for new payments: ${brl(b.safe)} · as of ${when(ctx.clock.now().toISOString())}</p>`,
          '/portal/balance',
        ),
      );
    });

    // ---- statement ----

    const STATEMENT_KEYS = ['status', 'type', 'date_from', 'date_to', 'page', 'per_page'] as const;
    const statementQuery = (req: FastifyRequest) => {
      const raw = req.query as Record<string, string>;
      const q = Object.create(null) as Record<string, string>;
      for (const k of STATEMENT_KEYS) if (typeof raw[k] === 'string' && raw[k] !== '') q[k] = raw[k];
      return q;
    };

    app.get('/portal/statement', async (req, reply) => {
      const s = req.portal!;
      if (!can(s, 'statement:read')) return forbidden(req, reply, 'statement:read');
      const q = statementQuery(req);
      let result;
      try {
        result = await statement(ctx, s.accountId, parseListParams(q));
      } catch (err) {
        return page(reply, layout(req, 'Statement', html`<div class="flash error" role="alert">${errorText(err)}</div><p><a href="/portal/statement">Clear the filters</a></p>`, '/portal/statement'), 400);
      }
      const link = (changes: Record<string, string>) => `?${new URLSearchParams({ ...q, ...changes }).toString()}`;
      const select = (name: string, options: string[]) =>
        html`<select name="${name}" id="f-${name}"><option value="">any</option>${options.map((o) => html`<option${q[name] === o ? html` selected` : ''}>${o}</option>`)}</select>`;
      const rows = result.data;
      const body = html`<form class="inline card" method="get" action="/portal/statement" aria-label="Filters">
<label for="f-status">Status ${select('status', ['settled', 'rejected', 'failed', 'processing'])}</label>
<label for="f-type">Type ${select('type', ['pix', 'ted', 'internal'])}</label>
<label>From <input type="date" name="date_from" value="${q.date_from ?? ''}"></label>
<label>To <input type="date" name="date_to" value="${q.date_to ?? ''}"></label>
<label>Per page <select name="per_page">${['20', '50', '100'].map((n) => html`<option${(q.per_page ?? '20') === n ? html` selected` : ''}>${n}</option>`)}</select></label>
<button type="submit">Filter</button> <a class="button secondary" href="/portal/statement.csv${link({})}" download>Export CSV</a></form>
<div class="scroll"><table><caption class="skip">Statement, page ${result.page}</caption><thead><tr><th>Date</th><th>Transaction</th><th class="hide-sm">Type</th><th>Counterparty</th><th>Status</th><th class="num">Amount</th><th class="num hide-sm">Fee</th></tr></thead><tbody>
${rows.length === 0 ? html`<tr><td colspan="7" class="muted">Nothing here.</td></tr>` : ''}
${rows.map(
  (r) => html`<tr><td>${when(r.created_at)}</td><td class="mono"><a href="/portal/transactions/${encodeURIComponent(r.transaction_id)}">${r.transaction_id}</a></td><td class="hide-sm">${r.type}</td><td>${r.counterparty_name}</td><td>${badge(r.status)}</td>
<td class="num">${r.direction === 'outbound' ? '−' : '+'}${brl(r.amount)}</td><td class="num hide-sm">${brl(r.fee_amount)}</td></tr>`,
)}
</tbody></table></div>
<p>${result.page > 1 ? html`<a href="${link({ page: String(result.page - 1) })}" rel="prev">← Newer</a> ` : ''}Page ${result.page}${rows.length >= result.per_page ? html` <a href="${link({ page: String(result.page + 1) })}" rel="next">Older →</a>` : ''}</p>`;
      return page(reply, layout(req, 'Statement', body, '/portal/statement'));
    });

    app.get('/portal/statement.csv', async (req, reply) => {
      const s = req.portal!;
      if (!can(s, 'statement:read')) return forbidden(req, reply, 'statement:read');
      const result = await statement(ctx, s.accountId, parseListParams(statementQuery(req)));
      const columns = ['created_at', 'transaction_id', 'end_to_end_id', 'external_id', 'type', 'direction', 'status', 'payment_status', 'amount', 'fee_amount', 'net_amount', 'counterparty_name', 'description', 'completed_at'] as const;
      const cell = (v: unknown) => {
        let t = v === null || v === undefined ? '' : String(v);
        if (/^[=+\-@\t\r]/.test(t)) t = `'${t}`; // spreadsheet formula injection
        return /[",\n\r]/.test(t) ? `"${t.replace(/"/g, '""')}"` : t;
      };
      const lines = [columns.join(','), ...result.data.map((r) => columns.map((c) => cell((r as Record<string, unknown>)[c])).join(','))];
      return reply
        .type('text/csv; charset=utf-8')
        .header('content-disposition', `attachment; filename="statement-${s.accountId}-page${result.page}.csv"`)
        .send(`${lines.join('\r\n')}\r\n`);
    });

    // ---- transaction detail ----

    app.get<{ Params: { id: string } }>('/portal/transactions/:id', async (req, reply) => {
      const s = req.portal!;
      if (!can(s, 'transfer:read')) return forbidden(req, reply, 'transfer:read');
      let record;
      try {
        record = await lookup(ctx, s.accountId, 'any_id', req.params.id);
      } catch (err) {
        return page(reply, layout(req, 'Transaction', html`<div class="flash error" role="alert">${errorText(err)}</div>`), portalRefusal(err)?.statusCode ?? 500);
      }
      let receipt: Html;
      try {
        const r = await transactionReceipt(ctx, s.accountId, record.transaction_id);
        receipt = html`<pre class="mono" data-testid="receipt">${JSON.stringify(r, null, 2)}</pre>`;
      } catch (err) {
        receipt = html`<p class="muted">${errorText(err)}</p>`;
      }
      const events = await ctx.db.query<{ event: string; event_id: string; created_at: Date; payload: Record<string, unknown> }>(
        'SELECT event, event_id, created_at, payload FROM outbox_events WHERE merchant_id = $1 AND subject = $2 ORDER BY id',
        [s.key.merchant_id, record.transaction_id],
      );
      const fields: [string, unknown][] = [
        ['Status', record.status],
        ['Payment status', record.payment_status],
        ['Type', record.type],
        ['Direction', record.direction],
        ['Amount', brl(record.amount)],
        ['Fee', brl(record.fee_amount)],
        ['Net', brl(record.net_amount)],
        ['Counterparty', record.counterparty_name],
        ['End-to-end id', record.end_to_end_id],
        ['External id', record.external_id],
        ['Description', record.description],
        ['Created', when(record.created_at)],
        ['Completed', when(record.completed_at)],
        ['Reason', record.reason_code],
      ];
      const body = html`<p class="mono">${record.transaction_id}</p>
<div class="card"><table><tbody>${fields.filter(([, v]) => v !== null && v !== '').map(([k, v]) => html`<tr><th scope="row">${k}</th><td>${String(v)}</td></tr>`)}</tbody></table></div>
<h2>Receipt</h2>${receipt}
<h2>Events</h2>${
        events.length === 0
          ? html`<p class="muted">No events.</p>`
          : html`<div class="scroll"><table><thead><tr><th>Event</th><th>Written</th><th>Body</th></tr></thead><tbody>${events.map(
              (e) => html`<tr><td>${e.event}</td><td>${when(isoZ(e.created_at))}</td><td><details><summary>show</summary><pre>${JSON.stringify(e.payload, null, 2)}</pre></details></td></tr>`,
            )}</tbody></table></div>`
      }`;
      return page(reply, layout(req, 'Transaction', body, '/portal/statement'));
    });

    // ---- charges ----

    app.get('/portal/charges', async (req, reply) => {
      const s = req.portal!;
      if (!can(s, 'pix:write')) return forbidden(req, reply, 'pix:write');
      const id = (req.query as Record<string, string>).created;
      let shown: Html = html``;
      if (typeof id === 'string' && /^[A-Z0-9]{1,64}$/.test(id)) {
        const [row] = await ctx.db.query<{ brcode: string; transaction_id: string; amount: number; status: string; expires_at: Date }>(
          `SELECT c.brcode, t.transaction_id, t.amount, c.status, c.expires_at FROM pix_charges c JOIN transactions t ON t.id = c.transaction_uuid
            WHERE t.transaction_id = $1 AND t.account_id = $2`,
          [id, s.accountId],
        );
        if (row) {
          shown = html`<div class="card"><h2>Charge ${row.transaction_id}</h2>
<img class="qr" alt="QR code of the charge: pay it with any PIX app" src="${qrCodeDataUrl(row.brcode)}" data-testid="qr">
<p>${brl(row.amount)} · ${badge(row.status)} · expires ${when(isoZ(row.expires_at))}</p>
<label>Copy and paste code <textarea readonly rows="3" class="mono" data-testid="emv">${row.brcode}</textarea></label></div>`;
        }
      }
      const body = html`${shown}<form class="stack card" method="post" action="/portal/charges">${csrfField(req)}
<label>Amount (R$) <input name="amount" inputmode="decimal" required placeholder="25,00" pattern="[0-9.,]+"></label>
<label>Description <input name="description" maxlength="140"></label>
<label>Payer name (optional) <input name="payer_name" maxlength="100"></label>
<label>Payer CPF/CNPJ (optional) <input name="payer_document" maxlength="18" inputmode="numeric"></label>
<label>Expires in (seconds) <input name="expires_in" type="number" min="60" value="3600"></label>
<label>External id (optional) <input name="external_id" maxlength="128"></label>
<button type="submit">Create charge</button></form>`;
      return page(reply, layout(req, 'Charge (PIX cash-in)', body, '/portal/charges'));
    });

    app.post('/portal/charges', async (req, reply) => {
      const s = req.portal!;
      if (!can(s, 'pix:write')) return forbidden(req, reply, 'pix:write');
      const f = req.body as Form;
      const created = (id: string) => ({ redirect: `/portal/charges?created=${encodeURIComponent(id)}`, message: `Charge ${id} created` });
      return action(req, reply, '/portal/charges', async (form) => {
        const expires = opt(f, 'expires_in');
        const command = parseChargeCommand({
          amount: parseReais(one(f, 'amount')) ?? -1,
          ...(expires ? { expires_in: Number(expires) } : {}),
          ...(opt(f, 'description') ? { description: opt(f, 'description') } : {}),
          ...(opt(f, 'payer_name') ? { payer_name: opt(f, 'payer_name') } : {}),
          ...(opt(f, 'payer_document') ? { payer_document: opt(f, 'payer_document') } : {}),
          ...(opt(f, 'external_id') ? { external_id: opt(f, 'external_id') } : {}),
        });
        const answer = await createCharge(ctx, principalOf(s), command, async (tx, _status, body) => {
          const c = created((body as { transaction_id: string }).transaction_id);
          await form.record(tx, form.ok(c.message, c.redirect));
        });
        return created(answer.body.transaction_id);
      });
    });

    // ---- TEF ----

    app.get('/portal/tef', async (req, reply) => {
      const s = req.portal!;
      if (!can(s, 'transfer:write')) return forbidden(req, reply, 'transfer:write');
      const b = await readBalances(ctx.db, s.accountId);
      const body = html`<p>Move money at once to another account of this institution: one of your own accounts (by its number) or another merchant’s (by one of its PIX keys). No fee.</p>
<p>Available now: <strong data-testid="available">${brl(b.safe)}</strong></p>
<form class="stack card" method="post" action="/portal/tef">${csrfField(req)}
<label>Amount (R$) <input name="amount" inputmode="decimal" required placeholder="10,00" pattern="[0-9.,]+"></label>
<label>PIX key of the destination <input name="pix_key" maxlength="77" spellcheck="false"></label>
<label>…or one of your account numbers <input name="account_id" inputmode="numeric" pattern="[0-9]*"></label>
<label>Description <input name="description" maxlength="140"></label>
<label>External id (optional, makes a retry safe) <input name="external_id" maxlength="128"></label>
<button type="submit">Transfer</button></form>`;
      return page(reply, layout(req, 'Transfer between accounts (TEF)', body, '/portal/tef'));
    });

    app.post('/portal/tef', async (req, reply) => {
      const s = req.portal!;
      if (!can(s, 'transfer:write')) return forbidden(req, reply, 'transfer:write');
      const f = req.body as Form;
      const done = (body: TefResponse) => `Transferred ${brl(body.amount)} to ${body.recipient.name} (${body.transaction_id})`;
      return action(req, reply, '/portal/tef', async (form) => {
        const account = opt(f, 'account_id');
        const command = parseTef({
          amount: parseReais(one(f, 'amount')) ?? -1,
          ...(account ? { account_id: /^\d{1,15}$/.test(account) ? Number(account) : account } : {}),
          ...(opt(f, 'pix_key') ? { pix_key: opt(f, 'pix_key') } : {}),
          ...(opt(f, 'description') ? { description: opt(f, 'description') } : {}),
          ...(opt(f, 'external_id') ? { external_id: opt(f, 'external_id') } : {}),
        });
        // The outcome (a settled or a recorded failed transfer) is recorded with the transfer.
        const answer = await transfer(ctx, { merchantId: s.key.merchant_id, accountId: s.accountId }, command, (tx, status, body) =>
          form.record(tx, status < 300 ? form.ok(done(body as TefResponse)) : form.refused(status, body)),
        );
        return done(answer.body);
      });
    });

    // ---- webhooks ----

    const scopeOf = (s: PortalSession): webhookRepo.WebhookScope => ({ merchantId: s.key.merchant_id, accountId: s.key.account_id });
    const findOwnWebhook = async (s: PortalSession, id: string) => {
      if (!/^[0-9a-f-]{36}$/i.test(id)) return undefined;
      const w = await webhookRepo.findWebhook(ctx.db, id.toLowerCase());
      const scope = scopeOf(s);
      if (!w || w.deleted_at || w.merchant_id !== scope.merchantId || (scope.accountId !== null && w.account_id !== scope.accountId)) return undefined;
      return w;
    };

    app.get('/portal/webhooks', async (req, reply) => {
      const s = req.portal!;
      if (!can(s, 'account:read')) return forbidden(req, reply, 'account:read');
      const rows = (await webhookRepo.listWebhooks(ctx.db, scopeOf(s))).map(listView);
      const writable = can(s, 'account:write');
      const subscribable = EVENT_CATALOG.filter((e) => e.firing !== 'manual');
      const body = html`<div class="scroll"><table><thead><tr><th>URL</th><th>Events</th><th>Status</th><th></th></tr></thead><tbody>
${rows.length === 0 ? html`<tr><td colspan="4" class="muted">No webhooks yet.</td></tr>` : ''}
${rows.map(
  (w) => html`<tr><td class="mono"><a href="/portal/webhooks/${w.id}">${w.url}</a>${w.description ? html`<div class="muted">${w.description}</div>` : ''}</td><td>${w.events.join(', ')}</td><td>${badge(w.status)}</td>
<td>${writable ? html`<form method="post" action="/portal/webhooks/${w.id}/delete">${csrfField(req)}<button class="danger" type="submit" aria-label="Delete webhook ${w.url}">Delete</button></form>` : ''}</td></tr>`,
)}</tbody></table></div>
${
  writable
    ? html`<h2>New webhook</h2><form class="stack card" method="post" action="/portal/webhooks">${csrfField(req)}
<label>URL <input name="url" type="url" required maxlength="2048" placeholder="https://example.com/pixgate"></label>
<fieldset><legend>Events</legend><div class="events">${subscribable.map((e) => html`<label class="check"><input type="checkbox" name="events" value="${e.event}"> ${e.event}</label>`)}</div></fieldset>
<label>Description <input name="description" maxlength="255"></label>
<label>Secret (optional; generated when empty) <input name="secret" maxlength="256" autocomplete="off"></label>
<label class="check"><input type="checkbox" name="allow_insecure" value="true"> Allow http:// (testing only)</label>
<button type="submit">Create webhook</button></form>`
    : ''
}`;
      return page(reply, layout(req, 'Webhooks', body, '/portal/webhooks'));
    });

    app.post('/portal/webhooks', async (req, reply) => {
      const s = req.portal!;
      if (!can(s, 'account:write')) return forbidden(req, reply, 'account:write');
      const f = req.body as Form;
      return action(req, reply, '/portal/webhooks', async () => {
        const created = await createWebhook(ctx, { merchantId: s.key.merchant_id, accountId: s.key.account_id, clientId: s.key.client_id }, {
          url: one(f, 'url') ?? '',
          events: many(f, 'events'),
          ...(opt(f, 'description') ? { description: opt(f, 'description') } : {}),
          ...(opt(f, 'secret') ? { secret: opt(f, 'secret') } : {}),
          ...(one(f, 'allow_insecure') === 'true' ? { allow_insecure: true } : {}),
        });
        return { redirect: `/portal/webhooks/${created.id}`, message: `Webhook created. Its signing secret: ${created.secret}` };
      });
    });

    app.post<{ Params: { id: string } }>('/portal/webhooks/:id/delete', async (req, reply) => {
      const s = req.portal!;
      if (!can(s, 'account:write')) return forbidden(req, reply, 'account:write');
      return action(req, reply, '/portal/webhooks', async () => {
        if (!(await findOwnWebhook(s, req.params.id)) || !(await deleteWebhook(ctx, scopeOf(s), req.params.id))) throw new HttpError(404, { detail: 'webhook not found' });
        return 'Webhook deleted';
      });
    });

    app.get<{ Params: { id: string } }>('/portal/webhooks/:id', async (req, reply) => {
      const s = req.portal!;
      if (!can(s, 'account:read')) return forbidden(req, reply, 'account:read');
      const w = await findOwnWebhook(s, req.params.id);
      if (!w) return page(reply, layout(req, 'Webhook', html`<p>Webhook not found.</p>`, '/portal/webhooks'), 404);
      const deliveries = await webhookRepo.listDeliveries(ctx.db, w.id, { limit: 50 });
      const attempts = await webhookRepo.attemptsOf(ctx.db, deliveries.map((d) => d.id));
      const writable = can(s, 'account:write');
      const body = html`<div class="card"><p class="mono">${w.url}</p><p>Events: ${w.events.join(', ')}</p><p>Status: ${badge(w.is_active ? 'active' : 'inactive')}</p>
${writable ? html`<form method="post" action="/portal/webhooks/${w.id}/test">${csrfField(req)}<button type="submit">Send webhook.test</button></form>` : ''}</div>
<h2>Delivery log</h2>
${deliveries.length === 0 ? html`<p class="muted">No deliveries yet.</p>` : ''}
${deliveries.map((d) => {
  const mine = attempts.filter((a) => a.delivery_id === d.id);
  return html`<div class="card" data-testid="delivery"><p><strong>${d.event}</strong> ${badge(d.status)} <span class="muted">${when(isoZ(d.event_created_at))} · ${d.attempts} attempt(s)</span></p>
${mine.length ? html`<div class="scroll"><table><thead><tr><th>#</th><th>Started</th><th>Status</th><th class="num">Latency</th><th>Response</th></tr></thead><tbody>${mine.map(
    (a) => html`<tr><td>${a.attempt}</td><td>${when(isoZ(a.started_at))}</td><td>${a.status_code ?? a.error ?? ''}</td><td class="num">${a.duration_ms} ms</td><td class="mono">${(a.response_body ?? '').slice(0, 200)}</td></tr>`,
  )}</tbody></table></div>` : ''}
${writable && d.status !== 'pending' ? html`<form method="post" action="/portal/webhooks/${w.id}/deliveries/${d.id}/resend">${csrfField(req)}<button class="secondary" type="submit">Resend</button></form>` : ''}</div>`;
})}`;
      return page(reply, layout(req, 'Webhook', body, '/portal/webhooks'));
    });

    app.post<{ Params: { id: string } }>('/portal/webhooks/:id/test', async (req, reply) => {
      const s = req.portal!;
      if (!can(s, 'account:write')) return forbidden(req, reply, 'account:write');
      return action(req, reply, `/portal/webhooks/${encodeURIComponent(req.params.id)}`, async () => {
        const w = await findOwnWebhook(s, req.params.id);
        if (!w) throw new HttpError(404, { detail: 'webhook not found' });
        await sendTestEvent(ctx, w, 'merchant portal');
        return 'webhook.test sent; its delivery appears below';
      });
    });

    app.post<{ Params: { id: string; delivery_id: string } }>('/portal/webhooks/:id/deliveries/:delivery_id/resend', async (req, reply) => {
      const s = req.portal!;
      if (!can(s, 'account:write')) return forbidden(req, reply, 'account:write');
      return action(req, reply, `/portal/webhooks/${encodeURIComponent(req.params.id)}`, async () => {
        const w = await findOwnWebhook(s, req.params.id);
        if (!w || !/^[0-9a-f-]{36}$/i.test(req.params.delivery_id)) throw new HttpError(404, { detail: 'delivery not found' });
        await resendDelivery(ctx, w, req.params.delivery_id.toLowerCase());
        return 'Delivery queued again';
      });
    });

    // ---- MED ----

    app.get('/portal/med', async (req, reply) => {
      const s = req.portal!;
      if (!can(s, 'payment:read')) return forbidden(req, reply, 'payment:read');
      const list = await listInfractions(ctx, s.accountId, { per_page: '100' });
      const body = html`<div class="scroll"><table><thead><tr><th>Opened</th><th>Transaction</th><th>Status</th><th class="num">Claimed</th><th class="num">Blocked</th><th>Defense deadline</th></tr></thead><tbody>
${list.data.length === 0 ? html`<tr><td colspan="6" class="muted">No MED cases.</td></tr>` : ''}
${list.data.map(
  (i) => html`<tr><td><a href="/portal/med/${i.id}">${when(i.created_at)}</a></td><td class="mono">${i.transaction_id}</td><td>${badge(i.status)}</td><td class="num">${brl(i.amount)}</td><td class="num">${brl(i.blocked_amount)}</td><td>${when(i.defense_deadline)}</td></tr>`,
)}</tbody></table></div>`;
      return page(reply, layout(req, 'MED cases', body, '/portal/med'));
    });

    app.get<{ Params: { id: string } }>('/portal/med/:id', async (req, reply) => {
      const s = req.portal!;
      if (!can(s, 'payment:read')) return forbidden(req, reply, 'payment:read');
      let i;
      try {
        i = await getInfraction(ctx, s.accountId, req.params.id);
      } catch (err) {
        return page(reply, layout(req, 'MED case', html`<div class="flash error" role="alert">${errorText(err)}</div>`, '/portal/med'), portalRefusal(err)?.statusCode ?? 500);
      }
      const open = i.status === 'OPEN' && i.defense_deadline !== null && new Date(i.defense_deadline).getTime() > ctx.clock.now().getTime();
      const body = html`<div class="card"><table><tbody>
<tr><th scope="row">Status</th><td>${badge(i.status)}</td></tr><tr><th scope="row">Reason</th><td>${i.reason}</td></tr>
<tr><th scope="row">Transaction</th><td class="mono">${i.transaction_id}</td></tr><tr><th scope="row">Payer</th><td>${i.payer.name} · ${i.payer.bank_name ?? i.payer.ispb}</td></tr>
<tr><th scope="row">Claimed</th><td>${brl(i.amount)} of ${brl(i.original_amount)}</td></tr><tr><th scope="row">Blocked</th><td>${brl(i.blocked_amount)}</td></tr>
<tr><th scope="row">Defense deadline</th><td><strong>${when(i.defense_deadline)}</strong></td></tr>
${i.decision ? html`<tr><th scope="row">Decision</th><td>${i.decision}</td></tr>` : ''}</tbody></table></div>
${i.defense ? html`<h2>Your defense</h2><div class="card"><p>${i.defense.text}</p><p class="muted">Submitted ${when(i.defense.submitted_at)}</p></div>` : ''}
${
  open && can(s, 'payment:write')
    ? html`<h2>Defense</h2><form class="stack card" method="post" action="/portal/med/${i.id}/defense">${csrfField(req)}
<label>What happened <textarea name="text" rows="6" required maxlength="5000"></textarea></label>
<label>Link to a document (optional) <input name="attachment_url" type="url" maxlength="2048"></label>
<button type="submit">Submit defense</button></form>`
    : ''
}`;
      return page(reply, layout(req, 'MED case', body, '/portal/med'));
    });

    app.post<{ Params: { id: string } }>('/portal/med/:id/defense', async (req, reply) => {
      const s = req.portal!;
      if (!can(s, 'payment:write')) return forbidden(req, reply, 'payment:write');
      const f = req.body as Form;
      return action(req, reply, `/portal/med/${encodeURIComponent(req.params.id)}`, async () => {
        const url = opt(f, 'attachment_url');
        const defense = parseDefense({ text: one(f, 'text') ?? '', ...(url ? { attachments: [{ url }] } : {}) });
        await submitDefense(ctx, s.accountId, req.params.id, defense, async () => {});
        return 'Defense submitted';
      });
    });

    // ---- sandbox ----

    if (sim) {
      const ownTransaction = async (s: PortalSession, id: string, kinds: string[]) => {
        const [row] = await ctx.db.query<{ transaction_id: string; end_to_end_id: string | null }>(
          'SELECT transaction_id, end_to_end_id FROM transactions WHERE account_id = $1 AND (transaction_id = $2 OR end_to_end_id = $2) AND kind = ANY($3::text[])',
          [s.accountId, id.trim(), kinds],
        );
        if (!row) throw new HttpError(404, { detail: `No such transaction of this account: ${id}` });
        return row;
      };
      const centsOf = (f: Form, name: string) => (opt(f, name) === undefined ? undefined : (parseReais(opt(f, name)) ?? -1));

      app.get('/portal/sandbox', async (req, reply) => {
        const s = req.portal!;
        if (!SANDBOX_PERMISSIONS.some((p) => can(s, p))) {
          return page(reply, layout(req, 'Not permitted', html`<p>The sandbox panel needs one of the permissions ${SANDBOX_PERMISSIONS.map((p, i) => html`${i ? ', ' : ''}<code>${p}</code>`)}; this API key has none.</p>`), 403);
        }
        const form = (path: SandboxForm, title: string, fields: Html, button: string) =>
          can(s, SANDBOX_PERMISSION[path])
            ? html`<form class="stack card" method="post" action="/portal/sandbox/${path}">${csrfField(req)}<h2>${title}</h2>${fields}<button type="submit">${button}</button></form>`
            : html``;
        const body = html`<p class="muted">Simulations of the other side of the PIX network, for this account only, under this API key’s permissions. Not available in production.</p>
<div class="grid">
${form('inbound', 'Receive a PIX', html`<label>Amount (R$) <input name="amount" inputmode="decimal" required pattern="[0-9.,]+"></label><label>Payer name <input name="payer_name" maxlength="100"></label>`, 'Receive')}
${form('pay', 'Pay a charge', html`<label>Copy-and-paste code (EMV) <textarea name="emv" rows="3" required></textarea></label>`, 'Pay')}
${form('infraction', 'Open an infraction', html`<label>Received PIX (transaction or end-to-end id) <input name="transaction" required></label><label>Amount claimed (R$, empty: all) <input name="amount" inputmode="decimal"></label>`, 'Open')}
${form('resolve', 'Resolve an infraction', html`<label>Infraction id <input name="infraction_id" required></label><label>Decision <select name="decision"><option>accepted</option><option>rejected</option><option>cancelled</option></select></label>`, 'Resolve')}
${form('payout', 'Decide a held payout', html`<label>Payout (transaction id) <input name="transaction" required></label><label>Action <select name="decision"><option>settle</option><option>reject</option><option>return</option></select></label><label>Return amount (R$, empty: all) <input name="amount" inputmode="decimal"></label>`, 'Apply')}
</div>`;
        return page(reply, layout(req, 'Sandbox', body, '/portal/sandbox'));
      });

      /**
       * A sandbox form: the key's permission for it, then the simulation itself (src/sandbox/actions.ts),
       * run as the merchant's action (a form action, logged with the key) — not through the operator's
       * sandbox API, whose calls are operator writes.
       */
      const sandboxForm = (name: SandboxForm, run: (s: PortalSession, f: Form) => Promise<string | { redirect: string; message: string }>) =>
        app.post(`/portal/sandbox/${name}`, async (req, reply) => {
          const s = req.portal!;
          if (!can(s, SANDBOX_PERMISSION[name])) return forbidden(req, reply, SANDBOX_PERMISSION[name]);
          return action(req, reply, '/portal/sandbox', () => run(s, req.body as Form));
        });

      sandboxForm('inbound', async (s, f) => {
        const body = parseOrThrow(inbound, { account_id: s.accountId, amount: parseReais(one(f, 'amount')) ?? -1, ...(opt(f, 'payer_name') ? { payer_name: opt(f, 'payer_name') } : {}) });
        const r = await receiveInbound(ctx, sim, { accountId: s.accountId, amountCents: body.amount, payerName: body.payer_name });
        return `Received ${brl(r.amount)} (${r.transaction_id})`;
      });
      sandboxForm('pay', async (s, f) => {
        const body = parseOrThrow(pay, { emv: (one(f, 'emv') ?? '').trim() });
        const r = await payBrCode(ctx, sim, { emv: body.emv, amountCents: undefined, payerName: undefined, payerDocument: undefined, payerIspb: undefined, onlyAccountId: s.accountId });
        return `Paid: end-to-end id ${r.end_to_end_id}`;
      });
      sandboxForm('infraction', async (s, f) => {
        const row = await ownTransaction(s, one(f, 'transaction') ?? '', ['pix_in', 'charge']);
        const cents = centsOf(f, 'amount');
        const body = parseOrThrow(report, { end_to_end_id: row.end_to_end_id ?? '', ...(cents === undefined ? {} : { amount: cents }) });
        const r = await openInfraction(ctx, sim, { endToEndId: body.end_to_end_id, amountCents: body.amount });
        return { redirect: `/portal/med/${r.id}`, message: `Infraction ${r.id} opened` };
      });
      sandboxForm('resolve', async (s, f) => {
        const id = (one(f, 'infraction_id') ?? '').trim();
        await getInfraction(ctx, s.accountId, id); // this account's only
        const { decision } = parseOrThrow(resolve, { decision: one(f, 'decision') });
        await resolveInfraction(ctx, sim, infractionId(id), decision);
        return { redirect: `/portal/med/${encodeURIComponent(id.toLowerCase())}`, message: `Infraction resolved: ${decision}` };
      });
      sandboxForm('payout', async (s, f) => {
        const row = await ownTransaction(s, one(f, 'transaction') ?? '', ['cash_out']);
        const decision = one(f, 'decision');
        if (decision !== 'settle' && decision !== 'reject' && decision !== 'return') throw new HttpError(400, { detail: 'Choose settle, reject or return' });
        if (decision === 'return') {
          const cents = centsOf(f, 'amount');
          const r = await returnPayout(ctx, sim, row.transaction_id, parseOrThrow(returnBody, cents === undefined ? undefined : { amount: cents })?.amount);
          if (!r.returned) throw new HttpError(422, { detail: r.detail });
        } else {
          await decidePayout(ctx, sim, row.transaction_id, decision);
        }
        return { redirect: `/portal/transactions/${encodeURIComponent(row.transaction_id)}`, message: `Payout ${row.transaction_id}: ${decision} applied` };
      });
    }

    // Any other page under /portal: the portal's own "not found" (after the session check).
    app.get('/portal/*', async (req, reply) => page(reply, layout(req, 'Not found', html`<p>There is no such page. <a href="/portal">Go to the portal</a>.</p>`), 404));
  };
}
