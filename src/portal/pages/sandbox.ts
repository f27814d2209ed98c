import type { FastifyInstance, FastifyRequest } from 'fastify';
import { HttpError } from '../../http/errors.js';
import { parseOrThrow } from '../../http/validation.js';
import { getInfraction, infractionId } from '../../med/merchant.js';
import type { SimulatedRail } from '../../rail/sim/simulatedRail.js';
import { decidePayout, openInfraction, receiveInbound, resolveInfraction, returnPayout } from '../../sandbox/actions.js';
import { payBrCode } from '../../sandbox/payerBank.js';
import { advanceBody } from '../../sandbox/clock.api.js';
import { advanceClock } from '../../sandbox/clock.routes.js';
import { SandboxClock } from '../../lib/sandboxClock.js';
import { inbound, pay, report, resolve, returnBody } from '../../sandbox/sandbox.api.js';
import { one, opt, type Form } from '../formBody.js';
import { brl, html, parseReais, type Html } from '../html.js';
import { SANDBOX_PERMISSION, SANDBOX_PERMISSIONS, type ActionDone, type Portal, type SandboxForm } from '../kit.js';
import { can, type PortalSession } from '../session.js';

/**
 * The sandbox panel (not in production): simulations of the other side of the PIX network for the
 * session's account, each under the permission of the merchant API flow it plays against.
 */
export function sandboxPages(app: FastifyInstance, portal: Portal, sim: SimulatedRail) {
  sandboxPanel(app, portal);
  sandboxActions(app, portal, sim);
  clockAction(app, portal);
}

/** The panel: one form per simulation the key's permissions allow. */
function sandboxPanel(app: FastifyInstance, portal: Portal) {
  const { layout, page, csrfField } = portal;
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
${clockForm(portal, req, s)}
${form('payout', 'Decide a held payout', html`<label>Payout (transaction id) <input name="transaction" required></label><label>Action <select name="decision"><option>settle</option><option>reject</option><option>return</option></select></label><label>Return amount (R$, empty: all) <input name="amount" inputmode="decimal"></label>`, 'Apply')}
</div>`;
    return page(reply, layout(req, 'Sandbox', body, '/portal/sandbox'));
  });
}

/** The panel's forms, each run as a form action of the merchant. */
function sandboxActions(app: FastifyInstance, portal: Portal, sim: SimulatedRail) {
  const { ctx, forbidden } = portal;

  const ownTransaction = async (s: PortalSession, id: string, kinds: string[]) => {
    const [row] = await ctx.db.query<{ transaction_id: string; end_to_end_id: string | null }>(
      'SELECT transaction_id, end_to_end_id FROM transactions WHERE account_id = $1 AND (transaction_id = $2 OR end_to_end_id = $2) AND kind = ANY($3::text[])',
      [s.accountId, id.trim(), kinds],
    );
    if (!row) throw new HttpError(404, { detail: `No such transaction of this account: ${id}` });
    return row;
  };
  const centsOf = (f: Form, name: string) => (opt(f, name) === undefined ? undefined : (parseReais(opt(f, name)) ?? -1));

  /**
   * A sandbox form: the key's permission for it, then the simulation itself (src/sandbox/actions.ts),
   * run as the merchant's action (a form action, logged with the key) — not through the operator's
   * sandbox API, whose calls are operator writes.
   */
  const sandboxForm = (name: SandboxForm, run: (s: PortalSession, f: Form) => Promise<ActionDone>) =>
    app.post(`/portal/sandbox/${name}`, async (req, reply) => {
      const s = req.portal!;
      if (!can(s, SANDBOX_PERMISSION[name])) return forbidden(req, reply, SANDBOX_PERMISSION[name]);
      return portal.action(req, reply, '/portal/sandbox', () => run(s, req.body as Form));
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

/** What the "Advance clock" form needs: a key that may create charges (the deadlines it plays against). */
const CLOCK_PERMISSION = 'pix:write';
const CLOCK_UNITS = { minutes: 60, hours: 3_600, days: 86_400 } as const;

/** The sandbox clock (docs/sandbox-clock.md): simulated now, and a form that moves it forward for the whole installation. */
function clockForm(portal: Portal, req: FastifyRequest, s: PortalSession): Html {
  const clock = portal.ctx.clock;
  if (!(clock instanceof SandboxClock) || !can(s, CLOCK_PERMISSION)) return html``;
  return html`<form class="stack card" method="post" action="/portal/sandbox/clock">${portal.csrfField(req)}<h2>Advance clock</h2>
<p class="muted">Simulated now: <time class="mono">${clock.now().toISOString()}</time> (${String(clock.offsetSeconds())} s ahead). Moves time forward for the whole installation; due deadlines fire.</p>
<label>Amount <input name="amount" inputmode="numeric" required pattern="[0-9]+"></label><label>Unit <select name="unit"><option>minutes</option><option>hours</option><option selected>days</option></select></label><button type="submit">Advance clock</button></form>`;
}

function clockAction(app: FastifyInstance, portal: Portal) {
  const clock = portal.ctx.clock;
  if (!(clock instanceof SandboxClock)) return;
  app.post('/portal/sandbox/clock', async (req, reply) => {
    const s = req.portal!;
    if (!can(s, CLOCK_PERMISSION)) return portal.forbidden(req, reply, CLOCK_PERMISSION);
    return portal.action(req, reply, '/portal/sandbox', async () => {
      const f = req.body as Form;
      const unit = CLOCK_UNITS[one(f, 'unit') as keyof typeof CLOCK_UNITS];
      if (unit === undefined) throw new HttpError(400, { detail: 'Choose minutes, hours or days' });
      const amount = /^\d{1,9}$/.test((one(f, 'amount') ?? '').trim()) ? Number(one(f, 'amount')!.trim()) : -1;
      const { seconds } = parseOrThrow(advanceBody, { seconds: amount * unit });
      await advanceClock(portal.ctx, clock, seconds);
      return `Clock advanced ${amount} ${one(f, 'unit')}: simulated now ${clock.now().toISOString()}`;
    });
  });
}
