import type { FastifyInstance, FastifyRequest } from 'fastify';
import { invalidFields } from '../../errors/catalog.js';
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
import { reaisField } from '../errors.js';
import { field, formState, type FormState } from '../fields.js';
import { html, type Html } from '../html.js';
import { dictionary, formatsOf } from '../i18n.js';
import { common } from '../messages.js';
import { SANDBOX_PERMISSION, SANDBOX_PERMISSIONS, type ActionDone, type Portal, type SandboxForm } from '../kit.js';
import { can, type PortalSession } from '../session.js';

const M = dictionary(
  {
    title: 'Sandbox',
    notPermitted: 'The sandbox panel needs one of these permissions; this API key has none:',
    intro: 'Simulations of the other side of the PIX network, for this account only, under this API key’s permissions. Not available in production.',
    inboundTitle: 'Receive a PIX',
    amount: 'Amount (R$)',
    payerName: 'Payer name',
    receive: 'Receive',
    payTitle: 'Pay a charge',
    emv: 'Copy-and-paste code (EMV)',
    pay: 'Pay',
    infractionTitle: 'Open an infraction',
    transaction: 'Received PIX (transaction or end-to-end id)',
    claimed: 'Amount claimed (R$, empty: all)',
    open: 'Open',
    resolveTitle: 'Resolve an infraction',
    infractionId: 'Infraction id',
    decision: 'Decision',
    accepted: 'accepted',
    rejected: 'rejected',
    cancelled: 'cancelled',
    resolve: 'Resolve',
    payoutTitle: 'Decide a held payout',
    payout: 'Payout (transaction id)',
    action: 'Action',
    settle: 'settle',
    reject: 'reject',
    return: 'return',
    returnAmount: 'Return amount (R$, empty: all)',
    apply: 'Apply',
    received: (amount: string, id: string) => `Received ${amount} (${id})`,
    paid: (e2e: string) => `Paid: end-to-end id ${e2e}`,
    opened: (id: string) => `Infraction ${id} opened`,
    resolved: (decision: string) => `Infraction resolved: ${decision}`,
    applied: (id: string, decision: string) => `Payout ${id}: ${decision} applied`,
    noSuch: (id: string) => `No such transaction of this account: ${id}`,
    choose: 'Choose settle, reject or return',
    clockTitle: 'Advance clock',
    clockNow: (now: string, offset: string) => `Simulated now: ${now} (${offset} s ahead). Moves time forward for the whole installation, not this account only; due deadlines fire.`,
    clockAmount: 'Amount',
    clockUnit: 'Unit',
    minutes: 'minutes',
    hours: 'hours',
    days: 'days',
    clockWhole: 'must be a whole number from 1',
    clockUnits: 'must be minutes, hours or days',
    clockTooFar: 'at most 366 days per advance',
    clockAdvanced: (amount: string, unit: string, now: string) => `Clock advanced ${amount} ${unit}: simulated now ${now}`,
  },
  {
    title: 'Sandbox',
    notPermitted: 'O painel sandbox precisa de uma destas permissões; esta chave de API não tem nenhuma:',
    intro: 'Simulações do outro lado da rede PIX, só para esta conta, com as permissões desta chave de API. Não disponível em produção.',
    inboundTitle: 'Receber um PIX',
    amount: 'Valor (R$)',
    payerName: 'Nome do pagador',
    receive: 'Receber',
    payTitle: 'Pagar uma cobrança',
    emv: 'PIX copia e cola (EMV)',
    pay: 'Pagar',
    infractionTitle: 'Abrir uma infração',
    transaction: 'PIX recebido (id da transação ou end-to-end)',
    claimed: 'Valor contestado (R$; vazio: tudo)',
    open: 'Abrir',
    resolveTitle: 'Resolver uma infração',
    infractionId: 'Id da infração',
    decision: 'Decisão',
    accepted: 'aceita',
    rejected: 'rejeitada',
    cancelled: 'cancelada',
    resolve: 'Resolver',
    payoutTitle: 'Decidir um pagamento retido',
    payout: 'Pagamento (id da transação)',
    action: 'Ação',
    settle: 'liquidar',
    reject: 'rejeitar',
    return: 'devolver',
    returnAmount: 'Valor devolvido (R$; vazio: tudo)',
    apply: 'Aplicar',
    received: (amount, id) => `Recebido ${amount} (${id})`,
    paid: (e2e) => `Pago: id end-to-end ${e2e}`,
    opened: (id) => `Infração ${id} aberta`,
    resolved: (decision) => `Infração resolvida: ${decision}`,
    applied: (id, decision) => `Pagamento ${id}: ${decision} aplicado`,
    noSuch: (id) => `Esta conta não tem a transação ${id}`,
    choose: 'Escolha liquidar, rejeitar ou devolver',
    clockTitle: 'Avançar o relógio',
    clockNow: (now, offset) => `Agora simulado: ${now} (${offset} s adiantado). Avança o tempo de toda a instalação, não só desta conta; os prazos vencidos disparam.`,
    clockAmount: 'Quantidade',
    clockUnit: 'Unidade',
    minutes: 'minutos',
    hours: 'horas',
    days: 'dias',
    clockWhole: 'deve ser um número inteiro a partir de 1',
    clockUnits: 'deve ser minutos, horas ou dias',
    clockTooFar: 'no máximo 366 dias por avanço',
    clockAdvanced: (amount, unit, now) => `Relógio avançado ${amount} ${unit}: agora simulado ${now}`,
  },
);

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
    const m = M(req.i18n);
    if (!SANDBOX_PERMISSIONS.some((p) => can(s, p))) {
      return page(reply, layout(req, common(req.i18n).notPermitted, html`<p>${m.notPermitted} ${SANDBOX_PERMISSIONS.map((p, i) => html`${i ? ', ' : ''}<code>${p}</code>`)}</p>`), 403);
    }
    const form = (path: SandboxForm, title: string, fields: (st: FormState) => Html, button: string) =>
      can(s, SANDBOX_PERMISSION[path])
        ? html`<form class="stack card" method="post" action="/portal/sandbox/${path}">${csrfField(req)}<h2>${title}</h2>${fields(formState(req, `/portal/sandbox/${path}`))}<button type="submit">${button}</button></form>`
        : html``;
    const body = html`<p class="muted">${m.intro}</p>
<div class="grid">
${form('inbound', m.inboundTitle, (st) => html`${field(st, { name: 'amount', label: m.amount, required: true, inputmode: 'decimal', pattern: '[0-9.,]+' })}${field(st, { name: 'payer_name', label: m.payerName, maxlength: 100 })}`, m.receive)}
${form('pay', m.payTitle, (st) => field(st, { name: 'emv', label: m.emv, rows: 3, required: true }), m.pay)}
${form('infraction', m.infractionTitle, (st) => html`${field(st, { name: 'transaction', label: m.transaction, required: true })}${field(st, { name: 'amount', label: m.claimed, inputmode: 'decimal' })}`, m.open)}
${form('resolve', m.resolveTitle, (st) => html`${field(st, { name: 'infraction_id', label: m.infractionId, required: true })}${field(st, { name: 'decision', label: m.decision, options: [['accepted', m.accepted], ['rejected', m.rejected], ['cancelled', m.cancelled]] })}`, m.resolve)}
${clockForm(portal, req, s)}
${form('payout', m.payoutTitle, (st) => html`${field(st, { name: 'transaction', label: m.payout, required: true })}${field(st, { name: 'decision', label: m.action, options: [['settle', m.settle], ['reject', m.reject], ['return', m.return]] })}${field(st, { name: 'amount', label: m.returnAmount, inputmode: 'decimal' })}`, m.apply)}
</div>`;
    return page(reply, layout(req, m.title, body, '/portal/sandbox'));
  });
}

/** The panel's forms, each run as a form action of the merchant. */
function sandboxActions(app: FastifyInstance, portal: Portal, sim: SimulatedRail) {
  const { ctx, forbidden } = portal;

  const ownTransaction = async (req: FastifyRequest, s: PortalSession, id: string, kinds: string[]) => {
    const [row] = await ctx.db.query<{ transaction_id: string; end_to_end_id: string | null }>(
      'SELECT transaction_id, end_to_end_id FROM transactions WHERE account_id = $1 AND (transaction_id = $2 OR end_to_end_id = $2) AND kind = ANY($3::text[])',
      [s.accountId, id.trim(), kinds],
    );
    if (!row) throw new HttpError(404, { detail: M(req.i18n).noSuch(id) });
    return row;
  };
  const centsOf = (f: Form, name: string) => reaisField(f, name, true);

  /**
   * A sandbox form: the key's permission for it, then the simulation itself (src/sandbox/actions.ts),
   * run as the merchant's action (a form action, logged with the key) — not through the operator's
   * sandbox API, whose calls are operator writes.
   */
  const sandboxForm = (name: SandboxForm, run: (s: PortalSession, f: Form, m: ReturnType<typeof M>, req: FastifyRequest) => Promise<ActionDone>) =>
    app.post(`/portal/sandbox/${name}`, async (req, reply) => {
      const s = req.portal!;
      if (!can(s, SANDBOX_PERMISSION[name])) return forbidden(req, reply, SANDBOX_PERMISSION[name]);
      const m = M(req.i18n);
      const labels = { amount: name === 'infraction' ? m.claimed : name === 'payout' ? m.returnAmount : m.amount, payer_name: m.payerName, emv: m.emv, transaction: name === 'payout' ? m.payout : m.transaction, infraction_id: m.infractionId, decision: m.decision };
      return portal.action(req, reply, '/portal/sandbox', () => run(s, req.body as Form, m, req), labels);
    });

  sandboxForm('inbound', async (s, f, m, req) => {
    const body = parseOrThrow(inbound, { account_id: s.accountId, amount: reaisField(f, 'amount'), ...(opt(f, 'payer_name') ? { payer_name: opt(f, 'payer_name') } : {}) });
    const r = await receiveInbound(ctx, sim, { accountId: s.accountId, amountCents: body.amount, payerName: body.payer_name });
    return m.received(formatsOf(req.i18n).brl(r.amount), r.transaction_id);
  });
  sandboxForm('pay', async (s, f, m) => {
    const body = parseOrThrow(pay, { emv: (one(f, 'emv') ?? '').trim() });
    const r = await payBrCode(ctx, sim, { emv: body.emv, amountCents: undefined, payerName: undefined, payerDocument: undefined, payerIspb: undefined, onlyAccountId: s.accountId });
    return m.paid(r.end_to_end_id);
  });
  sandboxForm('infraction', async (s, f, m, req) => {
    const row = await ownTransaction(req, s, one(f, 'transaction') ?? '', ['pix_in', 'charge']);
    const cents = centsOf(f, 'amount');
    const body = parseOrThrow(report, { end_to_end_id: row.end_to_end_id ?? '', ...(cents === undefined ? {} : { amount: cents }) });
    const r = await openInfraction(ctx, sim, { endToEndId: body.end_to_end_id, amountCents: body.amount });
    return { redirect: `/portal/med/${r.id}`, message: m.opened(r.id) };
  });
  sandboxForm('resolve', async (s, f, m) => {
    const id = (one(f, 'infraction_id') ?? '').trim();
    await getInfraction(ctx, s.accountId, id); // this account's only
    const { decision } = parseOrThrow(resolve, { decision: one(f, 'decision') });
    await resolveInfraction(ctx, sim, infractionId(id), decision);
    return { redirect: `/portal/med/${encodeURIComponent(id.toLowerCase())}`, message: m.resolved(decision) };
  });
  sandboxForm('payout', async (s, f, m, req) => {
    const row = await ownTransaction(req, s, one(f, 'transaction') ?? '', ['cash_out']);
    const decision = one(f, 'decision');
    if (decision !== 'settle' && decision !== 'reject' && decision !== 'return') throw new HttpError(400, { detail: m.choose });
    if (decision === 'return') {
      const cents = centsOf(f, 'amount');
      const r = await returnPayout(ctx, sim, row.transaction_id, parseOrThrow(returnBody, cents === undefined ? undefined : { amount: cents })?.amount);
      if (!r.returned) throw new HttpError(422, { detail: r.detail });
    } else {
      await decidePayout(ctx, sim, row.transaction_id, decision);
    }
    return { redirect: `/portal/transactions/${encodeURIComponent(row.transaction_id)}`, message: m.applied(row.transaction_id, decision) };
  });
}

/** What the "Advance clock" form needs: a key that may create charges (the deadlines it plays against). */
const CLOCK_PERMISSION = 'pix:write';
const CLOCK_UNITS = { days: 86_400, hours: 3_600, minutes: 60 } as const;
type ClockUnit = keyof typeof CLOCK_UNITS;

/** The sandbox clock (docs/sandbox-clock.md): simulated now, and a form that moves it forward for the whole installation. */
function clockForm(portal: Portal, req: FastifyRequest, s: PortalSession): Html {
  const clock = portal.ctx.clock;
  if (!(clock instanceof SandboxClock) || !can(s, CLOCK_PERMISSION)) return html``;
  const m = M(req.i18n);
  const st = formState(req, '/portal/sandbox/clock');
  return html`<form class="stack card" method="post" action="/portal/sandbox/clock">${portal.csrfField(req)}<h2>${m.clockTitle}</h2>
<p class="muted">${m.clockNow(formatsOf(req.i18n).dateTimeZone(clock.now()), String(clock.offsetSeconds()))}</p>
${field(st, { name: 'amount', label: m.clockAmount, required: true, inputmode: 'numeric', pattern: '[0-9]+' })}${field(st, { name: 'unit', label: m.clockUnit, options: (Object.keys(CLOCK_UNITS) as ClockUnit[]).map((u) => [u, m[u]] as [string, string]) })}<button type="submit">${m.clockTitle}</button></form>`;
}

function clockAction(app: FastifyInstance, portal: Portal) {
  const clock = portal.ctx.clock;
  if (!(clock instanceof SandboxClock)) return;
  app.post('/portal/sandbox/clock', async (req, reply) => {
    const s = req.portal!;
    if (!can(s, CLOCK_PERMISSION)) return portal.forbidden(req, reply, CLOCK_PERMISSION);
    const m = M(req.i18n);
    return portal.action(
      req,
      reply,
      '/portal/sandbox',
      async () => {
        const f = req.body as Form;
        const unitName = one(f, 'unit') as ClockUnit;
        if (!Object.hasOwn(CLOCK_UNITS, unitName)) throw invalidFields({ unit: [m.clockUnits] });
        const text = (one(f, 'amount') ?? '').trim();
        const amount = /^\d{1,9}$/.test(text) ? Number(text) : 0;
        if (amount < 1) throw invalidFields({ amount: [m.clockWhole] });
        const parsed = advanceBody.safeParse({ seconds: amount * CLOCK_UNITS[unitName] });
        if (!parsed.success) throw invalidFields({ amount: [m.clockTooFar] });
        await advanceClock(portal.ctx, clock, parsed.data.seconds);
        return m.clockAdvanced(String(amount), m[unitName], formatsOf(req.i18n).dateTimeZone(clock.now()));
      },
      { amount: m.clockAmount, unit: m.clockUnit },
    );
  });
}
