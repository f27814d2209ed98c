import type { FastifyInstance } from 'fastify';
import { EVENT_CATALOG } from '../../events/catalog.js';
import { HttpError } from '../../http/errors.js';
import { listView } from '../../webhooks/registration.js';
import * as webhookRepo from '../../webhooks/repository.js';
import { createWebhook, deleteWebhook } from '../../webhooks/service.js';
import { field, fieldErrors, formState } from '../fields.js';
import { many, one, opt, type Form } from '../formBody.js';
import { html } from '../html.js';
import { badge, type Portal } from '../kit.js';
import { can } from '../session.js';
import { stepUpRequired } from '../stepUp.js';
import { webhookDetailPages } from './webhookDetail.js';
import { findOwnWebhook, scopeOf, W } from './webhookShared.js';

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
    const m = W(req.i18n);
    const rows = (await webhookRepo.listWebhooks(ctx.db, scopeOf(s))).map(listView);
    const writable = can(s, 'account:write');
    const subscribable = EVENT_CATALOG.filter((e) => e.firing !== 'manual');
    const st = formState(req, '/portal/webhooks');
    const chosen = new Set(st.values('events'));
    const body = html`<div class="scroll"><table><thead><tr><th>${m.url}</th><th>${m.events}</th><th>${m.status}</th><th></th></tr></thead><tbody>
${rows.length === 0 ? html`<tr><td colspan="4" class="muted">${m.none}</td></tr>` : ''}
${rows.map(
  (w) => html`<tr><td class="mono"><a href="/portal/webhooks/${w.id}">${w.url}</a>${w.description ? html`<div class="muted">${w.description}</div>` : ''}</td><td class="events-list">${w.events.join(', ')}</td><td>${badge(w.status, req.i18n)}</td>
<td>${writable ? html`<form method="post" action="/portal/webhooks/${w.id}/delete">${csrfField(req)}<button class="danger" type="submit" aria-label="${m.deleteLabel(w.url)}">${m.delete}</button></form>` : ''}</td></tr>`,
)}</tbody></table></div>
${
  writable
    ? html`<h2>${m.newTitle}</h2><form class="stack card" method="post" action="/portal/webhooks">${csrfField(req)}
${field(st, { name: 'url', label: m.url, type: 'url', required: true, maxlength: 2048, placeholder: 'https://example.com/pixgate' })}
<fieldset${st.errors('events').length ? html` aria-describedby="err-events"` : ''}><legend>${m.events}</legend><div class="events">${subscribable.map(
        (e) => html`<label class="check"><input type="checkbox" name="events" value="${e.event}"${chosen.has(e.event) ? html` checked` : ''}> <span>${e.event}</span></label>`,
      )}</div>${fieldErrors(st, 'events')}</fieldset>
${field(st, { name: 'description', label: m.description, maxlength: 255 })}
${field(st, { name: 'secret', label: m.secret, maxlength: 256, autocomplete: 'off' })}
<label class="check"><input type="checkbox" name="allow_insecure" value="true"${st.value('allow_insecure') === 'true' ? html` checked` : ''}> ${m.insecure}</label>
<button type="submit">${m.create}</button></form>`
    : ''
}`;
    return page(reply, layout(req, m.title, body, '/portal/webhooks'));
  });

  app.post('/portal/webhooks', async (req, reply) => {
    const s = req.portal!;
    if (!can(s, 'account:write')) return forbidden(req, reply, 'account:write');
    const stepUp = stepUpRequired(portal, req, reply, '/portal/webhooks'); // a webhook secret: sensitive
    if (stepUp) return stepUp;
    const f = req.body as Form;
    const m = W(req.i18n);
    return portal.action(
      req,
      reply,
      '/portal/webhooks',
      async () => {
        const created = await createWebhook(ctx, { merchantId: s.key.merchant_id, accountId: s.key.account_id, clientId: s.key.client_id }, {
          url: one(f, 'url') ?? '',
          events: many(f, 'events'),
          ...(opt(f, 'description') ? { description: opt(f, 'description') } : {}),
          ...(opt(f, 'secret') ? { secret: opt(f, 'secret') } : {}),
          ...(one(f, 'allow_insecure') === 'true' ? { allow_insecure: true } : {}),
        });
        return { redirect: `/portal/webhooks/${created.id}`, message: m.created(created.secret) };
      },
      { url: m.url, events: m.events, description: m.description, secret: m.secret },
    );
  });

  app.post<{ Params: { id: string } }>('/portal/webhooks/:id/delete', async (req, reply) => {
    const s = req.portal!;
    if (!can(s, 'account:write')) return forbidden(req, reply, 'account:write');
    const stepUp = stepUpRequired(portal, req, reply, '/portal/webhooks');
    if (stepUp) return stepUp;
    const m = W(req.i18n);
    return portal.action(req, reply, '/portal/webhooks', async () => {
      if (!(await findOwnWebhook(ctx, s, req.params.id)) || !(await deleteWebhook(ctx, scopeOf(s), req.params.id))) throw new HttpError(404, { detail: m.notFound });
      return m.deleted;
    });
  });
}
