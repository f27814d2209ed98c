import type { FastifyInstance, FastifyRequest } from 'fastify';
import { operatorMay } from '../../auth/operators.js';
import { html, type Html } from '../../portal/html.js';
import { findWebhook } from '../../webhooks/endpointsRepo.js';
import { resendDelivery, sendTestEvent } from '../../webhooks/service.js';
import { auditedWrite } from '../audit.js';
import { cell } from './audit.js';
import { at, refusalText, type ConsoleKit } from '../kit.js';
import { failedDeliveries, webhookHealth, type WebhookHealth } from '../queries.js';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

/** Webhooks with their health; `webhook.test` for operators who may act on webhooks. */
export function webhookTable(req: FastifyRequest, kit: ConsoleKit, hooks: WebhookHealth[]): Html {
  if (!hooks.length) return html`<p class="muted">No webhooks.</p>`;
  const act = operatorMay(req.console!.operator.role, 'webhooks:act');
  return html`<div class="scroll"><table data-testid="webhooks"><thead><tr><th>Merchant</th><th>URL</th><th class="num">Failed</th><th class="num">Backlog</th><th>Oldest pending</th><th>Last answer</th><th></th></tr></thead><tbody>
${hooks.map(
  (w) => html`<tr data-webhook-id="${w.id}"><td>${w.merchant_name}</td><td><a class="mono" href="/console/webhooks/${w.id}">${w.url}</a>${w.description ? html`<div class="muted">${w.description}</div>` : ''}${w.is_active ? '' : html` <span class="badge">paused</span>`}</td>
<td class="num">${w.failed ? html`<span class="badge failed">${w.failed}</span>` : '0'}</td><td class="num">${w.pending}</td><td>${at(w.oldest_pending) || '—'}</td><td>${w.last_status_code ?? w.last_error ?? '—'}</td>
<td>${act ? html`<form method="post" action="/console/webhooks/${w.id}/test">${kit.csrf(req)}<button class="secondary" type="submit">Send webhook.test</button></form>` : ''}</td></tr>`,
)}</tbody></table></div>`;
}

export function webhookPages(app: FastifyInstance, kit: ConsoleKit) {
  const { ctx, layout, page, allow, csrf, flashAndBack } = kit;

  app.get('/console/webhooks', async (req, reply) => {
    if (!allow(req, reply, 'read')) return reply;
    const hooks = await webhookHealth(ctx.db, null);
    return page(reply, layout(req, 'Webhooks across merchants', html`<p class="muted">Failing endpoints first, then the largest backlog (deliveries of the last 30 days). <a href="/console/webhooks.csv">Export CSV</a></p>${webhookTable(req, kit, hooks)}`, '/console/webhooks'));
  });

  app.get('/console/webhooks.csv', async (req, reply) => {
    if (!allow(req, reply, 'read')) return reply;
    const lines = ['webhook_id,merchant_id,merchant_name,url,active,failed,pending,delivered,oldest_pending,last_status_code,last_error'];
    for (const w of await webhookHealth(ctx.db, null)) {
      lines.push([w.id, w.merchant_id, w.merchant_name, w.url, w.is_active, w.failed, w.pending, w.delivered, w.oldest_pending?.toISOString() ?? '', w.last_status_code, w.last_error].map(cell).join(','));
    }
    return reply.type('text/csv; charset=utf-8').header('content-disposition', 'attachment; filename="pixgate-webhooks.csv"').send(lines.join('\r\n') + '\r\n');
  });

  app.get<{ Params: { id: string } }>('/console/webhooks/:id', async (req, reply) => {
    if (!allow(req, reply, 'read')) return reply;
    const w = UUID.test(req.params.id) ? await findWebhook(ctx.db, req.params.id) : undefined;
    if (!w) return page(reply, layout(req, 'Webhook not found', html`<p>No such webhook.</p>`), 404);
    const act = operatorMay(req.console!.operator.role, 'webhooks:act');
    const deliveries = await failedDeliveries(ctx.db, w.id);
    const body = html`<p><span class="mono">${w.url}</span> · merchant ${w.merchant_id} · events ${w.events.join(', ')}</p>
${act ? html`<form method="post" action="/console/webhooks/${w.id}/test">${csrf(req)}<button type="submit">Send webhook.test</button></form>` : ''}
<h2>Last deliveries</h2><div class="scroll"><table data-testid="deliveries"><thead><tr><th>When</th><th>Event</th><th>Status</th><th class="num">Attempts</th><th>Last answer</th><th></th></tr></thead><tbody>
${deliveries.map(
  (d) => html`<tr><td>${at(d.created_at)}</td><td class="mono">${d.event}</td><td><span class="badge ${d.status}">${d.status}</span></td><td class="num">${d.attempts}</td><td>${d.last_status_code ?? '—'}</td>
<td>${act && d.status !== 'pending' ? html`<form method="post" action="/console/webhooks/${w.id}/deliveries/${d.id}/resend">${csrf(req)}<button class="secondary" type="submit">Resend</button></form>` : ''}</td></tr>`,
)}</tbody></table></div>`;
    return page(reply, layout(req, 'Webhook', body, '/console/webhooks'));
  });

  app.post<{ Params: { id: string } }>('/console/webhooks/:id/test', async (req, reply) => {
    if (!allow(req, reply, 'webhooks:act')) return reply;
    const back = '/console/webhooks';
    const w = UUID.test(req.params.id) ? await findWebhook(ctx.db, req.params.id) : undefined;
    if (!w) return flashAndBack(req, reply, 'error', 'No such webhook.', back);
    try {
      const deliveryId = await auditedWrite(ctx, req, `operator:${req.console!.operator.username}`, { webhook_id: w.id, merchant_id: w.merchant_id, event: 'webhook.test' }, () =>
        sendTestEvent(ctx, w, 'administration'), (d) => ({ delivery_id: d }),
      );
      return flashAndBack(req, reply, 'ok', `webhook.test queued for ${w.url} (delivery ${deliveryId}).`, `/console/webhooks/${w.id}`);
    } catch (err) {
      return flashAndBack(req, reply, 'error', refusalText(err), back);
    }
  });

  app.post<{ Params: { id: string; delivery: string } }>('/console/webhooks/:id/deliveries/:delivery/resend', async (req, reply) => {
    if (!allow(req, reply, 'webhooks:act')) return reply;
    const back = `/console/webhooks/${encodeURIComponent(req.params.id)}`;
    const w = UUID.test(req.params.id) ? await findWebhook(ctx.db, req.params.id) : undefined;
    if (!w || !UUID.test(req.params.delivery)) return flashAndBack(req, reply, 'error', 'No such delivery.', back);
    try {
      await auditedWrite(ctx, req, `operator:${req.console!.operator.username}`, { webhook_id: w.id, merchant_id: w.merchant_id, delivery_id: req.params.delivery }, () =>
        resendDelivery(ctx, w, req.params.delivery),
      );
      return flashAndBack(req, reply, 'ok', `Delivery ${req.params.delivery} queued again.`, back);
    } catch (err) {
      return flashAndBack(req, reply, 'error', refusalText(err), back);
    }
  });
}
