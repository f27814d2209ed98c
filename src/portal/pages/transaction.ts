import { portalRefusal } from '../refusal.js';
import type { FastifyInstance } from 'fastify';
import { isoZ } from '../../lib/clock.js';
import { lookup, transactionReceipt } from '../../transactions/statement.js';
import { brl, html, when, type Html } from '../html.js';
import { errorText, type Portal } from '../kit.js';
import { can } from '../session.js';

/** One transaction: its fields, its receipt and the events written about it. */
export function transactionPage(app: FastifyInstance, portal: Portal) {
  const { ctx, layout, page, forbidden } = portal;

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
}
