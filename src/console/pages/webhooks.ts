import type { FastifyInstance, FastifyRequest } from 'fastify';
import { operatorMay } from '../../auth/operators.js';
import { html, type Html } from '../../portal/html.js';
import { findWebhook } from '../../webhooks/endpointsRepo.js';
import { resendDelivery, sendTestEvent } from '../../webhooks/service.js';
import { auditedWrite } from '../audit.js';
import { lang, refusalText, type ConsoleKit } from '../kit.js';
import { dictionary } from '../../portal/i18n.js';
import { CSV_MAX, cut, pageOf, pager, sendCsv } from '../paging.js';
import { failedDeliveries, webhookHealth, type WebhookHealth } from '../queries.js';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

/** Webhooks with their health; `webhook.test` for operators who may act on webhooks. */
export function webhookTable(req: FastifyRequest, kit: ConsoleKit, hooks: WebhookHealth[]): Html {
  const { L, at } = lang(req);
  const t = M(L);
  if (!hooks.length) return html`<p class="muted">${t.none}</p>`;
  const act = operatorMay(req.console!.operator.role, 'webhooks:act');
  return html`<div class="scroll"><table data-testid="webhooks"><thead><tr><th>${t.merchant}</th><th>URL</th><th class="num">${t.failed}</th><th class="num">${t.backlog}</th><th>${t.oldest}</th><th>${t.last}</th><th></th></tr></thead><tbody>
${hooks.map(
  (w) => html`<tr data-webhook-id="${w.id}"><td>${w.merchant_name}</td><td><a class="mono" href="/console/webhooks/${w.id}">${w.url}</a>${w.description ? html`<div class="muted">${w.description}</div>` : ''}${w.is_active ? '' : html` <span class="badge">${t.paused}</span>`}</td>
<td class="num">${w.failed ? html`<span class="badge failed">${w.failed}</span>` : '0'}</td><td class="num">${w.pending}</td><td>${at(w.oldest_pending) || '—'}</td><td>${w.last_status_code ?? w.last_error ?? '—'}</td>
<td>${act ? html`<form method="post" action="/console/webhooks/${w.id}/test">${kit.csrf(req)}<button class="secondary" type="submit">${t.sendTest}</button></form>` : ''}</td></tr>`,
)}</tbody></table></div>`;
}

export function webhookPages(app: FastifyInstance, kit: ConsoleKit) {
  const { ctx, layout, page, allow, csrf, flashAndBack } = kit;

  app.get('/console/webhooks', async (req, reply) => {
    if (!allow(req, reply, 'read')) return reply;
    const at0 = pageOf(req);
    const { rows: hooks, more } = cut(await webhookHealth(ctx.db, null, at0.limit, at0.offset));
    const t = M(lang(req).L);
    return page(reply, layout(req, t.title, html`<p class="muted">${t.intro} <a href="/console/webhooks.csv">${t.csv}</a></p>${webhookTable(req, kit, hooks)}${pager(req, at0, more, '/console/webhooks.csv')}`, '/console/webhooks'));
  });

  app.get('/console/webhooks.csv', async (req, reply) => {
    if (!allow(req, reply, 'read')) return reply;
    const rows = await webhookHealth(ctx.db, null, CSV_MAX, 0);
    return sendCsv(reply, 'webhooks', ['webhook_id', 'merchant_id', 'merchant_name', 'url', 'active', 'failed', 'pending', 'delivered', 'oldest_pending', 'last_status_code', 'last_error'],
      rows.map((w) => [w.id, w.merchant_id, w.merchant_name, w.url, w.is_active, w.failed, w.pending, w.delivered, w.oldest_pending?.toISOString() ?? '', w.last_status_code, w.last_error]));
  });

  app.get<{ Params: { id: string } }>('/console/webhooks/:id', async (req, reply) => {
    if (!allow(req, reply, 'read')) return reply;
    const { L, at } = lang(req);
    const t = M(L);
    const w = UUID.test(req.params.id) ? await findWebhook(ctx.db, req.params.id) : undefined;
    if (!w) return page(reply, layout(req, t.notFound, html`<p>${t.noSuch}</p>`), 404);
    const act = operatorMay(req.console!.operator.role, 'webhooks:act');
    const deliveries = await failedDeliveries(ctx.db, w.id);
    const body = html`<p><span class="mono">${w.url}</span> · ${t.merchantL} ${w.merchant_id} · ${t.events} ${w.events.join(', ')}</p>
${act ? html`<form method="post" action="/console/webhooks/${w.id}/test">${csrf(req)}<button type="submit">${t.sendTest}</button></form>` : ''}
<h2>${t.lastDeliveries}</h2><div class="scroll"><table data-testid="deliveries"><thead><tr><th>${t.when}</th><th>${t.event}</th><th>${t.status}</th><th class="num">${t.attempts}</th><th>${t.last}</th><th></th></tr></thead><tbody>
${deliveries.map(
  (d) => html`<tr><td>${at(d.created_at)}</td><td class="mono">${d.event}</td><td><span class="badge ${d.status}">${d.status}</span></td><td class="num">${d.attempts}</td><td>${d.last_status_code ?? '—'}</td>
<td>${act && d.status !== 'pending' ? html`<form method="post" action="/console/webhooks/${w.id}/deliveries/${d.id}/resend">${csrf(req)}<button class="secondary" type="submit">${t.resend}</button></form>` : ''}</td></tr>`,
)}</tbody></table></div>`;
    return page(reply, layout(req, 'Webhook', body, '/console/webhooks'));
  });

  app.post<{ Params: { id: string } }>('/console/webhooks/:id/test', async (req, reply) => {
    if (!allow(req, reply, 'webhooks:act')) return reply;
    const back = '/console/webhooks';
    const { L } = lang(req);
    const t = M(L);
    const w = UUID.test(req.params.id) ? await findWebhook(ctx.db, req.params.id) : undefined;
    if (!w) return flashAndBack(req, reply, 'error', t.noSuch, back);
    try {
      const deliveryId = await auditedWrite(ctx, req, `operator:${req.console!.operator.username}`, { webhook_id: w.id, merchant_id: w.merchant_id, event: 'webhook.test' }, () =>
        sendTestEvent(ctx, w, 'administration'), (d) => ({ delivery_id: d }),
      );
      return flashAndBack(req, reply, 'ok', t.queued(w.url, deliveryId), `/console/webhooks/${w.id}`);
    } catch (err) {
      return flashAndBack(req, reply, 'error', refusalText(err, L), back);
    }
  });

  app.post<{ Params: { id: string; delivery: string } }>('/console/webhooks/:id/deliveries/:delivery/resend', async (req, reply) => {
    if (!allow(req, reply, 'webhooks:act')) return reply;
    const back = `/console/webhooks/${encodeURIComponent(req.params.id)}`;
    const { L } = lang(req);
    const t = M(L);
    const w = UUID.test(req.params.id) ? await findWebhook(ctx.db, req.params.id) : undefined;
    if (!w || !UUID.test(req.params.delivery)) return flashAndBack(req, reply, 'error', t.noDelivery, back);
    try {
      await auditedWrite(ctx, req, `operator:${req.console!.operator.username}`, { webhook_id: w.id, merchant_id: w.merchant_id, delivery_id: req.params.delivery }, () =>
        resendDelivery(ctx, w, req.params.delivery),
      );
      return flashAndBack(req, reply, 'ok', t.requeued(req.params.delivery), back);
    } catch (err) {
      return flashAndBack(req, reply, 'error', refusalText(err, L), back);
    }
  });
}

const M = dictionary(
  {
    title: 'Webhooks across merchants', none: 'No webhooks.', merchant: 'Merchant', failed: 'Failed', backlog: 'Backlog', oldest: 'Oldest pending',
    last: 'Last answer', paused: 'paused', sendTest: 'Send webhook.test', csv: 'Export CSV',
    intro: 'Failing endpoints first, then the largest backlog (deliveries of the last 30 days).',
    notFound: 'Webhook not found', noSuch: 'No such webhook.', merchantL: 'merchant', events: 'events', lastDeliveries: 'Last deliveries',
    when: 'When', event: 'Event', status: 'Status', attempts: 'Attempts', resend: 'Resend', noDelivery: 'No such delivery.',
    queued: (url: string, id: string) => `webhook.test queued for ${url} (delivery ${id}).`,
    requeued: (id: string) => `Delivery ${id} queued again.`,
  },
  {
    title: 'Webhooks de todos os comerciantes', none: 'Nenhum webhook.', merchant: 'Comerciante', failed: 'Falhas', backlog: 'Pendentes', oldest: 'Pendente mais antigo',
    last: 'Última resposta', paused: 'pausado', sendTest: 'Enviar webhook.test', csv: 'Exportar CSV',
    intro: 'Endpoints com falhas primeiro, depois a maior fila (entregas dos últimos 30 dias).',
    notFound: 'Webhook não encontrado', noSuch: 'Webhook inexistente.', merchantL: 'comerciante', events: 'eventos', lastDeliveries: 'Últimas entregas',
    when: 'Quando', event: 'Evento', status: 'Situação', attempts: 'Tentativas', resend: 'Reenviar', noDelivery: 'Entrega inexistente.',
    queued: (url: string, id: string) => `webhook.test enfileirado para ${url} (entrega ${id}).`,
    requeued: (id: string) => `Entrega ${id} enfileirada de novo.`,
  },
);
