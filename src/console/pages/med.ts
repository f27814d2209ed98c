import type { FastifyInstance } from 'fastify';
import { operatorMay } from '../../auth/operators.js';
import { one, type Form } from '../../portal/formBody.js';
import { html } from '../../portal/html.js';
import { INFRACTION_DECISIONS, type InfractionDecision } from '../../rail/rail.js';
import { resolveInfraction, simulator } from '../../sandbox/actions.js';
import { auditedWrite } from '../audit.js';
import { brl, lang, refusalText, type ConsoleKit } from '../kit.js';
import { dictionary } from '../../portal/i18n.js';
import { medQueue } from '../queries.js';
import { CSV_MAX, cut, pageOf, pager, sendCsv } from '../paging.js';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

/**
 * The MED queue across merchants: open cases, the nearest defense deadline first. The defense is
 * the merchant's; the decision is the central bank's — with the simulated rail (not in production)
 * an operator who may act on MED plays it here (the sandbox API's own function).
 */
export function medPages(app: FastifyInstance, kit: ConsoleKit) {
  const { ctx, layout, page, allow, csrf, flashAndBack } = kit;
  const sim = ctx.config.appEnv === 'production' ? null : simulator(ctx);

  app.get('/console/med', async (req, reply) => {
    if (!allow(req, reply, 'read')) return reply;
    const { L, at } = lang(req);
    const t = M(L);
    const at0 = pageOf(req);
    const { rows, more } = cut(await medQueue(ctx.db, at0.limit, at0.offset));
    const now = ctx.clock.now().getTime();
    const act = sim !== null && operatorMay(req.console!.operator.role, 'med:act');
    const body = rows.length
      ? html`<div class="scroll"><table data-testid="med"><thead><tr><th>${t.deadline}</th><th>${t.merchant}</th><th>${t.payment}</th><th>${t.status}</th><th>${t.reason}</th><th class="num">${t.amount}</th><th class="num">${t.blocked}</th>${act ? html`<th>${t.simulated}</th>` : ''}</tr></thead><tbody>
${rows.map(
  (r) => html`<tr data-infraction-id="${r.id}"><td>${at(r.defense_deadline)}${r.defense_deadline.getTime() < now ? html` <span class="badge failed">${t.overdue}</span>` : ''}</td>
<td><a href="/console/accounts/${r.account_id}">${r.merchant_name}</a></td><td><a class="mono" href="/console/transactions/${r.original_transaction_id}">${r.original_transaction_id}</a><div class="mono muted">${r.end_to_end_id}</div></td>
<td>${r.status}</td><td>${r.reason}</td><td class="num">${brl(r.amount)}</td><td class="num">${brl(r.blocked_amount)}</td>
${act ? html`<td><form class="inline" method="post" action="/console/med/${r.id}/resolve">${csrf(req)}<select name="decision" aria-label="${t.decision}">${INFRACTION_DECISIONS.map((d) => html`<option>${d}</option>`)}</select><button class="secondary" type="submit">${t.resolve}</button></form></td>` : ''}</tr>`,
)}</tbody></table></div>`
      : html`<p>${t.noCase}</p>`;
    const paged = html`${body}${pager(req, at0, more, '/console/med.csv')}`;
    return page(reply, layout(req, t.title, html`<p class="muted">${t.intro}${sim ? t.introSim : ''}.</p>${paged}`, '/console/med'));
  });

  app.get('/console/med.csv', async (req, reply) => {
    if (!allow(req, reply, 'read')) return reply;
    const rows = await medQueue(ctx.db, CSV_MAX, 0);
    return sendCsv(reply, 'med', ['infraction_id', 'account_id', 'merchant_name', 'transaction_id', 'end_to_end_id', 'status', 'reason', 'amount', 'blocked_amount', 'defense_deadline'],
      rows.map((r) => [r.id, r.account_id, r.merchant_name, r.original_transaction_id, r.end_to_end_id, r.status, r.reason, r.amount, r.blocked_amount, r.defense_deadline.toISOString()]));
  });

  app.post<{ Params: { id: string } }>('/console/med/:id/resolve', async (req, reply) => {
    if (!allow(req, reply, 'med:act')) return reply;
    const back = '/console/med';
    const decision = one(req.body as Form, 'decision');
    const { L } = lang(req);
    const t = M(L);
    if (!sim) return flashAndBack(req, reply, 'error', t.onlySim, back);
    if (!UUID.test(req.params.id) || !(INFRACTION_DECISIONS as readonly string[]).includes(decision ?? '')) return flashAndBack(req, reply, 'error', t.choose, back);
    try {
      await auditedWrite(ctx, req, `operator:${req.console!.operator.username}`, { infraction_id: req.params.id, decision }, () =>
        resolveInfraction(ctx, sim, req.params.id, decision as InfractionDecision),
      );
      return flashAndBack(req, reply, 'ok', t.resolved(req.params.id, decision!), back);
    } catch (err) {
      return flashAndBack(req, reply, 'error', refusalText(err, L), back);
    }
  });
}

const M = dictionary(
  {
    title: 'MED queue', deadline: 'Defense deadline', merchant: 'Merchant', payment: 'Payment', status: 'Status', reason: 'Reason',
    amount: 'Amount', blocked: 'Blocked', simulated: 'Simulated central bank', overdue: 'overdue', decision: 'Decision', resolve: 'Resolve',
    noCase: 'No open MED case.',
    intro: "Open infractions across merchants, the nearest defense deadline first. The defense is the merchant's (portal or API)",
    introSim: '; outside production the simulated central bank decides here',
    onlySim: 'Only the simulated rail is decided from the console; the real central bank decides its own infractions.',
    choose: 'Choose a decision.',
    resolved: (id: string, decision: string) => `Infraction ${id} resolved: ${decision}.`,
  },
  {
    title: 'Fila MED', deadline: 'Prazo da defesa', merchant: 'Comerciante', payment: 'Pagamento', status: 'Situação', reason: 'Motivo',
    amount: 'Valor', blocked: 'Bloqueado', simulated: 'Banco Central simulado', overdue: 'vencido', decision: 'Decisão', resolve: 'Decidir',
    noCase: 'Nenhum caso MED aberto.',
    intro: 'Infrações abertas de todos os comerciantes, o prazo de defesa mais próximo primeiro. A defesa é do comerciante (portal ou API)',
    introSim: '; fora de produção o Banco Central simulado decide aqui',
    onlySim: 'Só o SPI simulado é decidido pelo console; o Banco Central real decide suas próprias infrações.',
    choose: 'Escolha uma decisão.',
    resolved: (id: string, decision: string) => `Infração ${id} decidida: ${decision}.`,
  },
);
