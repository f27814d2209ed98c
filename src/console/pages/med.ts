import type { FastifyInstance } from 'fastify';
import { operatorMay } from '../../auth/operators.js';
import { one, type Form } from '../../portal/formBody.js';
import { html } from '../../portal/html.js';
import { INFRACTION_DECISIONS, type InfractionDecision } from '../../rail/rail.js';
import { resolveInfraction, simulator } from '../../sandbox/actions.js';
import { auditedWrite } from '../audit.js';
import { at, brl, refusalText, type ConsoleKit } from '../kit.js';
import { medQueue } from '../queries.js';

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
    const rows = await medQueue(ctx.db);
    const now = ctx.clock.now().getTime();
    const act = sim !== null && operatorMay(req.console!.operator.role, 'med:act');
    const body = rows.length
      ? html`<div class="scroll"><table data-testid="med"><thead><tr><th>Defense deadline</th><th>Merchant</th><th>Payment</th><th>Status</th><th>Reason</th><th class="num">Amount</th><th class="num">Blocked</th>${act ? html`<th>Simulated central bank</th>` : ''}</tr></thead><tbody>
${rows.map(
  (r) => html`<tr data-infraction-id="${r.id}"><td>${at(r.defense_deadline)}${r.defense_deadline.getTime() < now ? html` <span class="badge failed">overdue</span>` : ''}</td>
<td><a href="/console/accounts/${r.account_id}">${r.merchant_name}</a></td><td><a class="mono" href="/console/transactions/${r.original_transaction_id}">${r.original_transaction_id}</a><div class="mono muted">${r.end_to_end_id}</div></td>
<td>${r.status}</td><td>${r.reason}</td><td class="num">${brl(r.amount)}</td><td class="num">${brl(r.blocked_amount)}</td>
${act ? html`<td><form class="inline" method="post" action="/console/med/${r.id}/resolve">${csrf(req)}<select name="decision" aria-label="Decision">${INFRACTION_DECISIONS.map((d) => html`<option>${d}</option>`)}</select><button class="secondary" type="submit">Resolve</button></form></td>` : ''}</tr>`,
)}</tbody></table></div>`
      : html`<p>No open MED case.</p>`;
    return page(reply, layout(req, 'MED queue', html`<p class="muted">Open infractions across merchants, the nearest defense deadline first. The defense is the merchant's (portal or API)${sim ? '; outside production the simulated central bank decides here' : ''}.</p>${body}`, '/console/med'));
  });

  app.post<{ Params: { id: string } }>('/console/med/:id/resolve', async (req, reply) => {
    if (!allow(req, reply, 'med:act')) return reply;
    const back = '/console/med';
    const decision = one(req.body as Form, 'decision');
    if (!sim) return flashAndBack(req, reply, 'error', 'Only the simulated rail is decided from the console; the real central bank decides its own infractions.', back);
    if (!UUID.test(req.params.id) || !(INFRACTION_DECISIONS as readonly string[]).includes(decision ?? '')) return flashAndBack(req, reply, 'error', 'Choose a decision.', back);
    try {
      await auditedWrite(ctx, req, `operator:${req.console!.operator.username}`, { infraction_id: req.params.id, decision }, () =>
        resolveInfraction(ctx, sim, req.params.id, decision as InfractionDecision),
      );
      return flashAndBack(req, reply, 'ok', `Infraction ${req.params.id} resolved: ${decision}.`, back);
    } catch (err) {
      return flashAndBack(req, reply, 'error', refusalText(err), back);
    }
  });
}
