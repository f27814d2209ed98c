import type { FastifyInstance } from 'fastify';
import type { AppContext } from '../../context.js';
import { EVENT_CATALOG } from '../../events/catalog.js';
import { HttpError } from '../../http/errors.js';
import { isoZ } from '../../lib/clock.js';
import { listView } from '../../webhooks/registration.js';
import * as webhookRepo from '../../webhooks/repository.js';
import { createWebhook, deleteWebhook, resendDelivery, sendTestEvent } from '../../webhooks/service.js';
import { many, one, opt, type Form } from '../formBody.js';
import { html, when } from '../html.js';
import { badge, type Portal } from '../kit.js';
import { stepUpRequired } from '../stepUp.js';
import { can, type PortalSession } from '../session.js';

/** The webhooks the session's key sees: its merchant's, and only its account's for an account key. */
const scopeOf = (s: PortalSession): webhookRepo.WebhookScope => ({ merchantId: s.key.merchant_id, accountId: s.key.account_id });

/** A webhook of the key's scope, or undefined (not an id, not found, deleted, or another's). */
async function findOwnWebhook(ctx: AppContext, s: PortalSession, id: string) {
  if (!/^[0-9a-f-]{36}$/i.test(id)) return undefined;
  const w = await webhookRepo.findWebhook(ctx.db, id.toLowerCase());
  const scope = scopeOf(s);
  if (!w || w.deleted_at || w.merchant_id !== scope.merchantId || (scope.accountId !== null && w.account_id !== scope.accountId)) return undefined;
  return w;
}

/** The key's webhooks: the list and the new-webhook form, one webhook's delivery log, and their actions. */
export function webhookPages(app: FastifyInstance, portal: Portal) {
  webhookListPages(app, portal);
  webhookDetailPages(app, portal);
}

/** The list with its new-webhook form; create and delete. */
function webhookListPages(app: FastifyInstance, portal: Portal) {
  const { ctx, layout, page, forbidden, csrfField } = portal;

  app.get('/portal/webhooks', async (req, reply) => {
    const s = req.portal!;
    if (!can(s, 'account:read')) return forbidden(req, reply, 'account:read');
    const rows = (await webhookRepo.listWebhooks(ctx.db, scopeOf(s))).map(listView);
    const writable = can(s, 'account:write');
    const subscribable = EVENT_CATALOG.filter((e) => e.firing !== 'manual');
    const body = html`<div class="scroll"><table><thead><tr><th>URL</th><th>Events</th><th>Status</th><th></th></tr></thead><tbody>
${rows.length === 0 ? html`<tr><td colspan="4" class="muted">No webhooks yet.</td></tr>` : ''}
${rows.map(
  (w) => html`<tr><td class="mono"><a href="/portal/webhooks/${w.id}">${w.url}</a>${w.description ? html`<div class="muted">${w.description}</div>` : ''}</td><td>${w.events.join(', ')}</td><td>${badge(w.status)}</td>
<td>${writable ? html`<form method="post" action="/portal/webhooks/${w.id}/delete">${csrfField(req)}<button class="danger" type="submit" aria-label="Delete webhook ${w.url}">Delete</button></form>` : ''}</td></tr>`,
)}</tbody></table></div>
${
  writable
    ? html`<h2>New webhook</h2><form class="stack card" method="post" action="/portal/webhooks">${csrfField(req)}
<label>URL <input name="url" type="url" required maxlength="2048" placeholder="https://example.com/pixgate"></label>
<fieldset><legend>Events</legend><div class="events">${subscribable.map((e) => html`<label class="check"><input type="checkbox" name="events" value="${e.event}"> ${e.event}</label>`)}</div></fieldset>
<label>Description <input name="description" maxlength="255"></label>
<label>Secret (optional; generated when empty) <input name="secret" maxlength="256" autocomplete="off"></label>
<label class="check"><input type="checkbox" name="allow_insecure" value="true"> Allow http:// (testing only)</label>
<button type="submit">Create webhook</button></form>`
    : ''
}`;
    return page(reply, layout(req, 'Webhooks', body, '/portal/webhooks'));
  });

  app.post('/portal/webhooks', async (req, reply) => {
    const s = req.portal!;
    if (!can(s, 'account:write')) return forbidden(req, reply, 'account:write');
    const stepUp = stepUpRequired(portal, req, reply, '/portal/webhooks'); // a webhook secret: sensitive
    if (stepUp) return stepUp;
    const f = req.body as Form;
    return portal.action(req, reply, '/portal/webhooks', async () => {
      const created = await createWebhook(ctx, { merchantId: s.key.merchant_id, accountId: s.key.account_id, clientId: s.key.client_id }, {
        url: one(f, 'url') ?? '',
        events: many(f, 'events'),
        ...(opt(f, 'description') ? { description: opt(f, 'description') } : {}),
        ...(opt(f, 'secret') ? { secret: opt(f, 'secret') } : {}),
        ...(one(f, 'allow_insecure') === 'true' ? { allow_insecure: true } : {}),
      });
      return { redirect: `/portal/webhooks/${created.id}`, message: `Webhook created. Its signing secret: ${created.secret}` };
    });
  });

  app.post<{ Params: { id: string } }>('/portal/webhooks/:id/delete', async (req, reply) => {
    const s = req.portal!;
    if (!can(s, 'account:write')) return forbidden(req, reply, 'account:write');
    const stepUp = stepUpRequired(portal, req, reply, '/portal/webhooks');
    if (stepUp) return stepUp;
    return portal.action(req, reply, '/portal/webhooks', async () => {
      if (!(await findOwnWebhook(ctx, s, req.params.id)) || !(await deleteWebhook(ctx, scopeOf(s), req.params.id))) throw new HttpError(404, { detail: 'webhook not found' });
      return 'Webhook deleted';
    });
  });

}

/** One webhook and its delivery log; send webhook.test and resend a delivery. */
function webhookDetailPages(app: FastifyInstance, portal: Portal) {
  const { ctx, layout, page, forbidden, csrfField } = portal;

  app.get<{ Params: { id: string } }>('/portal/webhooks/:id', async (req, reply) => {
    const s = req.portal!;
    if (!can(s, 'account:read')) return forbidden(req, reply, 'account:read');
    const w = await findOwnWebhook(ctx, s, req.params.id);
    if (!w) return page(reply, layout(req, 'Webhook', html`<p>Webhook not found.</p>`, '/portal/webhooks'), 404);
    const deliveries = await webhookRepo.listDeliveries(ctx.db, w.id, { limit: 50 });
    const attempts = await webhookRepo.attemptsOf(ctx.db, deliveries.map((d) => d.id));
    const writable = can(s, 'account:write');
    const body = html`<div class="card"><p class="mono">${w.url}</p><p>Events: ${w.events.join(', ')}</p><p>Status: ${badge(w.is_active ? 'active' : 'inactive')}</p>
${writable ? html`<form method="post" action="/portal/webhooks/${w.id}/test">${csrfField(req)}<button type="submit">Send webhook.test</button></form>` : ''}</div>
<h2>Delivery log</h2>
${deliveries.length === 0 ? html`<p class="muted">No deliveries yet.</p>` : ''}
${deliveries.map((d) => {
  const mine = attempts.filter((a) => a.delivery_id === d.id);
  return html`<div class="card" data-testid="delivery"><p><strong>${d.event}</strong> ${badge(d.status)} <span class="muted">${when(isoZ(d.event_created_at))} · ${d.attempts} attempt(s)</span></p>
${mine.length ? html`<div class="scroll"><table><thead><tr><th>#</th><th>Started</th><th>Status</th><th class="num">Latency</th><th>Response</th></tr></thead><tbody>${mine.map(
  (a) => html`<tr><td>${a.attempt}</td><td>${when(isoZ(a.started_at))}</td><td>${a.status_code ?? a.error ?? ''}</td><td class="num">${a.duration_ms} ms</td><td class="mono">${(a.response_body ?? '').slice(0, 200)}</td></tr>`,
  )}</tbody></table></div>` : ''}
${writable && d.status !== 'pending' ? html`<form method="post" action="/portal/webhooks/${w.id}/deliveries/${d.id}/resend">${csrfField(req)}<button class="secondary" type="submit">Resend</button></form>` : ''}</div>`;
})}`;
    return page(reply, layout(req, 'Webhook', body, '/portal/webhooks'));
  });

  app.post<{ Params: { id: string } }>('/portal/webhooks/:id/test', async (req, reply) => {
    const s = req.portal!;
    if (!can(s, 'account:write')) return forbidden(req, reply, 'account:write');
    return portal.action(req, reply, `/portal/webhooks/${encodeURIComponent(req.params.id)}`, async () => {
      const w = await findOwnWebhook(ctx, s, req.params.id);
      if (!w) throw new HttpError(404, { detail: 'webhook not found' });
      await sendTestEvent(ctx, w, 'merchant portal');
      return 'webhook.test sent; its delivery appears below';
    });
  });

  app.post<{ Params: { id: string; delivery_id: string } }>('/portal/webhooks/:id/deliveries/:delivery_id/resend', async (req, reply) => {
    const s = req.portal!;
    if (!can(s, 'account:write')) return forbidden(req, reply, 'account:write');
    return portal.action(req, reply, `/portal/webhooks/${encodeURIComponent(req.params.id)}`, async () => {
      const w = await findOwnWebhook(ctx, s, req.params.id);
      if (!w || !/^[0-9a-f-]{36}$/i.test(req.params.delivery_id)) throw new HttpError(404, { detail: 'delivery not found' });
      await resendDelivery(ctx, w, req.params.delivery_id.toLowerCase());
      return 'Delivery queued again';
    });
  });
}
