import type { FastifyInstance } from 'fastify';
import { HttpError } from '../../http/errors.js';
import { invalidFields } from '../../errors/catalog.js';
import * as webhookRepo from '../../webhooks/repository.js';
import { redeliverFailedSince, REDELIVER_MAX, REDELIVER_WINDOW_DAYS, resendDelivery, sendTestEvent } from '../../webhooks/service.js';
import { field, formState } from '../fields.js';
import { one, type Form } from '../formBody.js';
import { html } from '../html.js';
import { dictionary, formatsOf, parseZonedDateTime, toZonedInput } from '../i18n.js';
import { badge, type Portal } from '../kit.js';
import { can } from '../session.js';
import { findOwnWebhook, W } from './webhookShared.js';

const M = dictionary(
  {
    title: 'Webhook',
    events: (list: string) => `Events: ${list}`,
    status: 'Status:',
    sendTest: 'Send webhook.test',
    redeliverTitle: 'Redeliver failed deliveries',
    redeliverHelp: (max: number, days: number) => `Every delivery that failed for good since this moment goes out again (same delivery id, a fresh retry schedule): at most ${max} at a time, up to ${days} days back.`,
    since: 'Failed since',
    redeliver: 'Redeliver every failed delivery since then',
    redelivered: (n: number, left: number) => (left ? `${n} deliveries queued again; ${left} more failed since then: send the form again for them` : `${n} deliveries queued again`),
    log: 'Delivery log',
    none: 'No deliveries yet.',
    attempts: (n: number) => `${n} attempt(s)`,
    attempt: '#',
    started: 'Started',
    answer: 'Answer',
    latency: 'Latency',
    details: 'Request and answer',
    request: 'Request',
    response: 'Answer',
    noAnswer: (error: string) => `No answer: ${error}`,
    signatures: 'x-service-signature, webhook-signature: HMAC of this body under the webhook’s secret (computed at each attempt; not stored)',
    resend: 'Resend',
    testSent: 'webhook.test sent; its delivery appears below',
    resent: 'Delivery queued again',
    deliveryNotFound: 'delivery not found',
  },
  {
    title: 'Webhook',
    events: (list) => `Eventos: ${list}`,
    status: 'Situação:',
    sendTest: 'Enviar webhook.test',
    redeliverTitle: 'Reenviar entregas que falharam',
    redeliverHelp: (max, days) => `Toda entrega que falhou de vez desde este momento sai de novo (mesmo id de entrega, novo calendário de tentativas): no máximo ${max} por vez, até ${days} dias atrás.`,
    since: 'Falharam desde',
    redeliver: 'Reenviar todas as entregas que falharam desde então',
    redelivered: (n, left) => (left ? `${n} entregas de volta na fila; outras ${left} falharam desde então: envie o formulário de novo para elas` : `${n} entregas de volta na fila`),
    log: 'Registro de entregas',
    none: 'Nenhuma entrega ainda.',
    attempts: (n) => `${n} tentativa(s)`,
    attempt: '#',
    started: 'Início',
    answer: 'Resposta',
    latency: 'Latência',
    details: 'Requisição e resposta',
    request: 'Requisição',
    response: 'Resposta',
    noAnswer: (error) => `Sem resposta: ${error}`,
    signatures: 'x-service-signature, webhook-signature: HMAC deste corpo com o segredo do webhook (calculado a cada tentativa; não armazenado)',
    resend: 'Reenviar',
    testSent: 'webhook.test enviado; a entrega aparece abaixo',
    resent: 'Entrega de volta na fila',
    deliveryNotFound: 'entrega não encontrada',
  },
);

/** One webhook and its delivery log (each attempt's request and answer); webhook.test, resend, redeliver since. */
export function webhookDetailPages(app: FastifyInstance, portal: Portal) {
  const { ctx, layout, page, forbidden, csrfField } = portal;

  app.get<{ Params: { id: string } }>('/portal/webhooks/:id', async (req, reply) => {
    const s = req.portal!;
    if (!can(s, 'account:read')) return forbidden(req, reply, 'account:read');
    const m = M(req.i18n);
    const f = formatsOf(req.i18n);
    const w = await findOwnWebhook(ctx, s, req.params.id);
    if (!w) return page(reply, layout(req, m.title, html`<p>${W(req.i18n).notFound}</p>`, '/portal/webhooks'), 404);
    const deliveries = await webhookRepo.listDeliveries(ctx.db, w.id, { limit: 50 });
    const attempts = await webhookRepo.attemptsOf(ctx.db, deliveries.map((d) => d.id));
    const writable = can(s, 'account:write');
    const action = `/portal/webhooks/${w.id}/redeliver`;
    const st = formState(req, action);
    const dayAgo = toZonedInput(new Date(ctx.clock.now().getTime() - 86_400_000), req.i18n.timeZone);
    const body = html`<div class="card"><p class="mono">${w.url}</p><p>${m.events(w.events.join(', '))}</p><p>${m.status} ${badge(w.is_active ? 'active' : 'inactive', req.i18n)}</p>
${writable ? html`<form method="post" action="/portal/webhooks/${w.id}/test">${csrfField(req)}<button type="submit">${m.sendTest}</button></form>` : ''}</div>
${
  writable
    ? html`<h2>${m.redeliverTitle}</h2><form class="stack card" method="post" action="${action}">${csrfField(req)}<p class="muted">${m.redeliverHelp(REDELIVER_MAX, REDELIVER_WINDOW_DAYS)}</p>
${field(st, { name: 'since', label: html`${m.since} <span class="muted">(${req.i18n.timeZone})</span>`, type: 'datetime-local', required: true, value: dayAgo })}
<button type="submit">${m.redeliver}</button></form>`
    : ''
}
<h2>${m.log}</h2>
${deliveries.length === 0 ? html`<p class="muted">${m.none}</p>` : ''}
${deliveries.map((d) => {
  const mine = attempts.filter((a) => a.delivery_id === d.id);
  const sent = JSON.stringify(d.payload);
  return html`<div class="card" data-testid="delivery" data-delivery="${d.id}"><p><strong>${d.event}</strong> ${badge(d.status, req.i18n)} <span class="muted">${f.dateTime(d.event_created_at)} · ${m.attempts(d.attempts)}</span></p>
${mine.length ? html`<div class="scroll"><table><thead><tr><th>${m.attempt}</th><th>${m.started}</th><th>${m.answer}</th><th class="num">${m.latency}</th></tr></thead><tbody>${mine.map(
  (a) => html`<tr><td>${a.attempt}</td><td>${f.dateTime(a.started_at)}</td><td>${a.status_code ?? a.error ?? ''}</td><td class="num">${a.duration_ms} ms</td></tr>
<tr class="attempt-detail"><td colspan="4"><details data-testid="attempt"><summary>${m.details} #${a.attempt}</summary>
<h3>${m.request}</h3><pre data-testid="attempt-request">POST ${w.url}
content-type: application/json
x-service-event: ${d.event}
x-service-delivery: ${d.id}
x-service-attempt: ${a.attempt}
webhook-id: ${d.id}
webhook-timestamp: ${Math.floor(a.started_at.getTime() / 1000)}
${m.signatures}

${sent}</pre>
<h3>${m.response}</h3><pre data-testid="attempt-answer">${a.status_code !== null ? html`HTTP ${a.status_code} · ${a.duration_ms} ms\n\n${a.response_body ?? ''}` : m.noAnswer(a.error ?? '')}</pre></details></td></tr>`,
)}</tbody></table></div>` : ''}
${writable && d.status !== 'pending' ? html`<form method="post" action="/portal/webhooks/${w.id}/deliveries/${d.id}/resend">${csrfField(req)}<button class="secondary" type="submit">${m.resend}</button></form>` : ''}</div>`;
})}`;
    return page(reply, layout(req, m.title, body, '/portal/webhooks'));
  });

  app.post<{ Params: { id: string } }>('/portal/webhooks/:id/test', async (req, reply) => {
    const s = req.portal!;
    if (!can(s, 'account:write')) return forbidden(req, reply, 'account:write');
    const m = M(req.i18n);
    return portal.action(req, reply, `/portal/webhooks/${encodeURIComponent(req.params.id)}`, async () => {
      const w = await findOwnWebhook(ctx, s, req.params.id);
      if (!w) throw new HttpError(404, { detail: W(req.i18n).notFound });
      await sendTestEvent(ctx, w, 'merchant portal');
      return m.testSent;
    });
  });

  app.post<{ Params: { id: string } }>('/portal/webhooks/:id/redeliver', async (req, reply) => {
    const s = req.portal!;
    if (!can(s, 'account:write')) return forbidden(req, reply, 'account:write');
    const m = M(req.i18n);
    return portal.action(
      req,
      reply,
      `/portal/webhooks/${encodeURIComponent(req.params.id)}`,
      async () => {
        const w = await findOwnWebhook(ctx, s, req.params.id);
        if (!w) throw new HttpError(404, { detail: W(req.i18n).notFound });
        const since = parseZonedDateTime(one(req.body as Form, 'since'), req.i18n.timeZone);
        if (!since) throw invalidFields({ since: ['must be a date and time'] });
        const r = await redeliverFailedSince(ctx, w, since);
        return m.redelivered(r.requeued, r.remaining);
      },
      { since: m.since },
    );
  });

  app.post<{ Params: { id: string; delivery_id: string } }>('/portal/webhooks/:id/deliveries/:delivery_id/resend', async (req, reply) => {
    const s = req.portal!;
    if (!can(s, 'account:write')) return forbidden(req, reply, 'account:write');
    const m = M(req.i18n);
    return portal.action(req, reply, `/portal/webhooks/${encodeURIComponent(req.params.id)}`, async () => {
      const w = await findOwnWebhook(ctx, s, req.params.id);
      if (!w || !/^[0-9a-f-]{36}$/i.test(req.params.delivery_id)) throw new HttpError(404, { detail: m.deliveryNotFound });
      await resendDelivery(ctx, w, req.params.delivery_id.toLowerCase());
      return m.resent;
    });
  });
}
