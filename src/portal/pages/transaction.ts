import type { FastifyInstance } from 'fastify';
import { lookup } from '../../transactions/statement.js';
import { errorText } from '../errors.js';
import { html } from '../html.js';
import { dictionary, formatsOf } from '../i18n.js';
import { badge, type Portal } from '../kit.js';
import { portalRefusal } from '../refusal.js';
import { can } from '../session.js';

export const T = dictionary(
  {
    title: 'Transaction',
    status: 'Status',
    paymentStatus: 'Payment status',
    type: 'Type',
    direction: 'Direction',
    inbound: 'received',
    outbound: 'sent',
    amount: 'Amount',
    fee: 'Fee',
    net: 'Net',
    counterparty: 'Counterparty',
    e2e: 'End-to-end id',
    externalId: 'External id',
    description: 'Description',
    created: 'Created',
    completed: 'Completed',
    reason: 'Reason',
    receipt: 'Receipt',
    openReceipt: 'Open the receipt (comprovante)',
    noReceipt: 'The receipt is available once a PIX is settled.',
    timeline: 'Timeline',
    openTimeline: 'See everything that happened to it: request, ledger, rail, webhooks, MED and refunds',
    events: 'Events',
    noEvents: 'No events.',
    event: 'Event',
    written: 'Written',
    body: 'Body',
    show: 'show',
  },
  {
    title: 'Transação',
    status: 'Situação',
    paymentStatus: 'Situação do pagamento',
    type: 'Tipo',
    direction: 'Sentido',
    inbound: 'recebida',
    outbound: 'enviada',
    amount: 'Valor',
    fee: 'Tarifa',
    net: 'Líquido',
    counterparty: 'Contraparte',
    e2e: 'Id end-to-end',
    externalId: 'Id externo',
    description: 'Descrição',
    created: 'Criada em',
    completed: 'Concluída em',
    reason: 'Motivo',
    receipt: 'Comprovante',
    openReceipt: 'Abrir o comprovante',
    noReceipt: 'O comprovante fica disponível quando o PIX é liquidado.',
    timeline: 'Linha do tempo',
    openTimeline: 'Ver tudo o que aconteceu com ela: requisição, razão contábil, rede, webhooks, MED e devoluções',
    events: 'Eventos',
    noEvents: 'Nenhum evento.',
    event: 'Evento',
    written: 'Gravado em',
    body: 'Corpo',
    show: 'mostrar',
  },
);

/** One transaction: its fields, links to its receipt and timeline, and the events written about it. */
export function transactionPage(app: FastifyInstance, portal: Portal) {
  const { ctx, layout, page, forbidden } = portal;

  app.get<{ Params: { id: string } }>('/portal/transactions/:id', async (req, reply) => {
    const s = req.portal!;
    if (!can(s, 'transfer:read')) return forbidden(req, reply, 'transfer:read');
    const m = T(req.i18n);
    const f = formatsOf(req.i18n);
    let record;
    try {
      record = await lookup(ctx, s.accountId, 'any_id', req.params.id);
    } catch (err) {
      return page(reply, layout(req, m.title, html`<div class="flash error" role="alert">${errorText(err, req.i18n)}</div>`), portalRefusal(err)?.statusCode ?? 500);
    }
    const events = await ctx.db.query<{ event: string; event_id: string; created_at: Date; payload: Record<string, unknown> }>(
      'SELECT event, event_id, created_at, payload FROM outbox_events WHERE merchant_id = $1 AND subject = $2 ORDER BY id',
      [s.key.merchant_id, record.transaction_id],
    );
    const settledPix = record.type === 'pix' && record.status === 'completed' && record.final && record.end_to_end_id !== null;
    const base = `/portal/transactions/${encodeURIComponent(record.transaction_id)}`;
    const fields: [string, unknown][] = [
      [m.status, badge(record.status, req.i18n)],
      [m.paymentStatus, record.payment_status],
      [m.type, record.type],
      [m.direction, record.direction === 'inbound' ? m.inbound : m.outbound],
      [m.amount, f.brl(record.amount)],
      [m.fee, f.brl(record.fee_amount)],
      [m.net, f.brl(record.net_amount)],
      [m.counterparty, record.counterparty_name],
      [m.e2e, record.end_to_end_id],
      [m.externalId, record.external_id],
      [m.description, record.description],
      [m.created, f.dateTime(record.created_at)],
      [m.completed, f.dateTime(record.completed_at)],
      [m.reason, record.reason_code],
    ];
    const body = html`<p class="mono">${record.transaction_id}</p>
<div class="card"><table class="fields"><tbody>${fields
      .filter(([, v]) => v !== null && v !== '')
      .map(([k, v]) => html`<tr><th scope="row">${k}</th><td>${typeof v === 'object' ? (v as ReturnType<typeof html>) : String(v)}</td></tr>`)}</tbody></table></div>
<p class="actions">${settledPix ? html`<a class="button" href="${base}/receipt" data-testid="receipt-link">${m.openReceipt}</a>` : html`<span class="muted">${m.noReceipt}</span>`}
<a class="button secondary" href="${base}/timeline">${m.timeline}</a></p>
<h2>${m.events}</h2>${
      events.length === 0
        ? html`<p class="muted">${m.noEvents}</p>`
        : html`<div class="scroll"><table><thead><tr><th>${m.event}</th><th>${m.written}</th><th>${m.body}</th></tr></thead><tbody>${events.map(
            (e) => html`<tr><td>${e.event}</td><td>${f.dateTime(e.created_at)}</td><td><details><summary>${m.show}</summary><pre>${JSON.stringify(e.payload, null, 2)}</pre></details></td></tr>`,
          )}</tbody></table></div>`
    }`;
    return page(reply, layout(req, m.title, body, '/portal/statement'));
  });
}
