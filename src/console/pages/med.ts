import type { FastifyInstance } from 'fastify';
import { html } from '../../portal/html.js';
import { at, brl, type ConsoleKit } from '../kit.js';
import { medQueue } from '../queries.js';

/** The MED queue across merchants: open cases, the nearest defense deadline first (read-only). */
export function medPages(app: FastifyInstance, kit: ConsoleKit) {
  const { ctx, layout, page, allow } = kit;
  app.get('/console/med', async (req, reply) => {
    if (!allow(req, reply, 'read')) return reply;
    const rows = await medQueue(ctx.db);
    const now = ctx.clock.now().getTime();
    const body = rows.length
      ? html`<div class="scroll"><table data-testid="med"><thead><tr><th>Defense deadline</th><th>Merchant</th><th>Payment</th><th>Status</th><th>Reason</th><th class="num">Amount</th><th class="num">Blocked</th></tr></thead><tbody>
${rows.map(
  (r) => html`<tr><td>${at(r.defense_deadline)}${r.defense_deadline.getTime() < now ? html` <span class="badge failed">overdue</span>` : ''}</td>
<td><a href="/console/accounts/${r.account_id}">${r.merchant_name}</a></td><td><a class="mono" href="/console/transactions/${r.original_transaction_id}">${r.original_transaction_id}</a><div class="mono muted">${r.end_to_end_id}</div></td>
<td>${r.status}</td><td>${r.reason}</td><td class="num">${brl(r.amount)}</td><td class="num">${brl(r.blocked_amount)}</td></tr>`,
)}</tbody></table></div>`
      : html`<p>No open MED case.</p>`;
    return page(reply, layout(req, 'MED queue', html`<p class="muted">Open infractions across merchants, the nearest defense deadline first. The defense is the merchant's (portal or API).</p>${body}`, '/console/med'));
  });
}
