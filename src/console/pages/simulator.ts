import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { Sql } from '../../db/db.js';
import { one, type Form } from '../../portal/formBody.js';
import { html, parseReais } from '../../portal/html.js';
import { dictionary } from '../../portal/i18n.js';
import { decidePayout, openInfraction, receiveInbound, returnPayout, simulator } from '../../sandbox/actions.js';
import { auditedWrite } from '../audit.js';
import { lang, refusalText, type ConsoleKit } from '../kit.js';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
const E2E = /^[A-Za-z0-9]{32}$/;

/** The simulator's state: its payment orders by status, open infractions, directory keys, and the stall switch. */
export async function simulatorState(db: Sql) {
  const byStatus = await db.query<{ status: string; n: number }>('SELECT status, count(*)::int AS n FROM sim_payments GROUP BY status ORDER BY status');
  const [inf] = await db.query<{ n: number }>(`SELECT count(*)::int AS n FROM sim_infractions WHERE status = 'OPEN'`);
  const [keys] = await db.query<{ n: number }>('SELECT count(*)::int AS n FROM sim_dict_entries');
  return { byStatus, openInfractions: inf?.n ?? 0, keys: keys?.n ?? 0 };
}

/**
 * The rail simulator's panel (not in production; owner and operations): its state and the controls
 * the sandbox API offers — an inbound PIX, a payout settled or rejected, a return, an infraction,
 * the stall switch — through the same functions as src/sandbox/, each write audited.
 */
export function simulatorPages(app: FastifyInstance, kit: ConsoleKit) {
  const { ctx, layout, page, allow, csrf, flashAndBack } = kit;
  const sim = ctx.config.appEnv === 'production' ? null : simulator(ctx);
  const back = '/console/simulator';

  app.get('/console/simulator', async (req, reply) => {
    if (!allow(req, reply, 'rail:simulate')) return reply;
    const t = M(lang(req).L);
    if (!sim) return page(reply, layout(req, t.title, html`<p data-testid="refused">${t.notSimulated}</p>`), 404);
    const st = await simulatorState(ctx.db);
    const stall = await sim.readStall();
    const body = html`<div class="grid" data-testid="sim-state">
${st.byStatus.map((r) => html`<div class="card"><div class="label">${t.orders} · ${r.status}</div><div class="figure" data-status="${r.status}">${r.n}</div></div>`)}
<div class="card"><div class="label">${t.openInfractions}</div><div class="figure" data-testid="sim-infractions">${st.openInfractions}</div></div>
<div class="card"><div class="label">${t.keys}</div><div class="figure" data-testid="sim-keys">${st.keys}</div></div>
<div class="card"><div class="label">${t.stall}</div><div class="figure" data-testid="sim-stall">${stall.drop ? t.dropped : `${stall.delay_ms} ms`}</div></div></div>
<h2>${t.inbound}</h2><form class="inline card" method="post" action="/console/simulator/inbound">${csrf(req)}
<label>${t.accountId} <input name="account_id" inputmode="numeric" required maxlength="15"></label>
<label>${t.amountR} <input name="amount" inputmode="decimal" required maxlength="20" placeholder="1.234,56"></label>
<label>${t.payer} <input name="payer_name" maxlength="140"></label><button type="submit">${t.send}</button></form>
<h2>${t.payout}</h2><form class="inline card" method="post" action="/console/simulator/payout">${csrf(req)}
<label>${t.txId} <input name="transaction_id" required maxlength="36"></label>
<label>${t.decision} <select name="decision"><option value="settle">${t.settle}</option><option value="reject">${t.reject}</option><option value="return">${t.return}</option></select></label>
<label>${t.returnAmount} <input name="amount" inputmode="decimal" maxlength="20"></label><button type="submit">${t.apply}</button></form>
<h2>${t.infraction}</h2><form class="inline card" method="post" action="/console/simulator/infraction">${csrf(req)}
<label>${t.e2e} <input name="end_to_end_id" required maxlength="32"></label><button type="submit">${t.open}</button></form>
<h2>${t.stall}</h2><form class="inline card" method="post" action="/console/simulator/stall">${csrf(req)}
<label>${t.delay} <input name="delay_ms" inputmode="numeric" maxlength="6" value="${stall.delay_ms}"></label>
<label><input type="checkbox" name="drop" value="1"${stall.drop ? html` checked` : ''}> ${t.drop}</label><button type="submit">${t.apply}</button></form>`;
    return page(reply, layout(req, t.title, body, '/console/simulator'));
  });

  /** One control: role, simulator, validated input, the audited call, a flash. */
  const control = (path: string, run: (f: Form, req: FastifyRequest) => { target: Record<string, unknown>; call: () => Promise<unknown> } | string) => {
    app.post(`/console/simulator/${path}`, async (req, reply) => {
      if (!allow(req, reply, 'rail:simulate')) return reply;
      const { L } = lang(req);
      const t = M(L);
      if (!sim) return flashAndBack(req, reply, 'error', t.notSimulated, '/console');
      const got = run(req.body as Form, req);
      if (typeof got === 'string') return flashAndBack(req, reply, 'error', got, back);
      try {
        await auditedWrite(ctx, req, `operator:${req.console!.operator.username}`, { simulator: path, ...got.target }, got.call);
        return flashAndBack(req, reply, 'ok', t.done, back);
      } catch (err) {
        return flashAndBack(req, reply, 'error', refusalText(err, L), back);
      }
    });
  };
  control('inbound', (f, req) => {
    const t = M(lang(req).L);
    const accountId = Number(one(f, 'account_id'));
    const cents = parseReais(one(f, 'amount'));
    if (!Number.isSafeInteger(accountId) || accountId <= 0 || cents === null || cents <= 0) return t.invalid;
    const payerName = (one(f, 'payer_name') ?? '').trim().slice(0, 140) || undefined;
    return { target: { account_id: accountId, amount_cents: cents }, call: () => receiveInbound(ctx, sim!, { accountId, amountCents: cents, payerName }) };
  });
  control('payout', (f, req) => {
    const t = M(lang(req).L);
    const id = one(f, 'transaction_id') ?? '';
    const decision = one(f, 'decision');
    const text = (one(f, 'amount') ?? '').trim();
    const cents = text ? parseReais(text) : undefined;
    if (!UUID.test(id) || cents === null || (cents !== undefined && cents <= 0)) return t.invalid;
    if (decision === 'settle' || decision === 'reject') return { target: { transaction_id: id, decision }, call: () => decidePayout(ctx, sim!, id, decision) };
    if (decision === 'return') return { target: { transaction_id: id, decision, amount_cents: cents ?? null }, call: () => returnPayout(ctx, sim!, id, cents) };
    return t.invalid;
  });
  control('infraction', (f, req) => {
    const e2e = (one(f, 'end_to_end_id') ?? '').trim();
    if (!E2E.test(e2e)) return M(lang(req).L).invalid;
    return { target: { end_to_end_id: e2e }, call: () => openInfraction(ctx, sim!, { endToEndId: e2e }) };
  });
  control('stall', (f, req) => {
    const delay = Number(one(f, 'delay_ms') ?? '0');
    if (!Number.isSafeInteger(delay) || delay < 0 || delay > 600_000) return M(lang(req).L).invalid;
    const drop = one(f, 'drop') === '1';
    return { target: { delay_ms: delay, drop }, call: () => sim!.setStall({ delay_ms: delay, drop }) };
  });
}

const M = dictionary(
  {
    title: 'Rail simulator', notSimulated: 'The rail is not simulated here (production, or a real rail): no simulator controls.',
    orders: 'Payment orders', openInfractions: 'Open infractions', keys: 'Directory keys', stall: 'Stall switch', dropped: 'answers dropped',
    inbound: 'Inbound PIX to an account', accountId: 'Account id', amountR: 'Amount (R$)', payer: 'Payer name', send: 'Send the PIX',
    payout: 'A payout: settle, reject or return', txId: 'Transaction id', decision: 'Decision', settle: 'settle', reject: 'reject', return: 'return',
    returnAmount: 'Return amount (R$, empty: all)', apply: 'Apply', infraction: 'Open an infraction (MED) on a received PIX', e2e: 'End-to-end id',
    open: 'Open the infraction', delay: 'Answer delay (ms)', drop: 'Drop the answers', done: 'Done: the simulator applied it.',
    invalid: 'Check the fields: an account id, a transaction id (UUID), an end-to-end id (32 characters), amounts in reais as 1.234,56.',
  },
  {
    title: 'Simulador do SPI', notSimulated: 'O SPI não é simulado aqui (produção, ou SPI real): sem controles do simulador.',
    orders: 'Ordens de pagamento', openInfractions: 'Infrações abertas', keys: 'Chaves do diretório', stall: 'Atraso do SPI', dropped: 'respostas descartadas',
    inbound: 'PIX recebido por uma conta', accountId: 'Id da conta', amountR: 'Valor (R$)', payer: 'Nome do pagador', send: 'Enviar o PIX',
    payout: 'Um pagamento: liquidar, rejeitar ou devolver', txId: 'Id da transação', decision: 'Decisão', settle: 'liquidar', reject: 'rejeitar', return: 'devolver',
    returnAmount: 'Valor da devolução (R$, vazio: tudo)', apply: 'Aplicar', infraction: 'Abrir uma infração (MED) sobre um PIX recebido', e2e: 'End-to-end id',
    open: 'Abrir a infração', delay: 'Atraso da resposta (ms)', drop: 'Descartar as respostas', done: 'Feito: o simulador aplicou.',
    invalid: 'Confira os campos: id da conta, id da transação (UUID), end-to-end id (32 caracteres), valores em reais como 1.234,56.',
  },
);
