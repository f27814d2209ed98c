import type { FastifyInstance } from 'fastify';
import type { AppContext } from '../../context.js';
import { conflict, notFound } from '../../http/errors.js';
import { parseOrThrow } from '../../http/validation.js';
import { isoZ } from '../../lib/clock.js';
import * as repo from '../../webhooks/repository.js';
import { mount } from '../../http/routeSpec.js';
import { adminListQuery as listQuery, deliveriesQuery, deliveryParam, idParam, patchBody, webhooksAdminApi as api } from './webhooks.api.js';
import { resendDelivery, sendTestEvent } from '../../webhooks/service.js';

function webhookView(w: repo.WebhookRow, counts?: Pick<repo.WebhookWithCounts, 'pending' | 'delivered' | 'failed' | 'cancelled'>) {
  return {
    id: w.id,
    merchant_id: w.merchant_id,
    account_id: w.account_id,
    client_id: w.client_id,
    url: w.url,
    events: w.events,
    description: w.description,
    is_active: w.is_active,
    allow_insecure: w.allow_insecure,
    status: w.deleted_at ? 'deleted' : w.is_active ? 'active' : 'inactive',
    created_at: isoZ(w.created_at),
    updated_at: isoZ(w.updated_at),
    deleted_at: isoZ(w.deleted_at),
    ...(counts ? { deliveries: { pending: counts.pending, delivered: counts.delivered, failed: counts.failed, cancelled: counts.cancelled } } : {}),
  };
}

function attemptView(a: repo.AttemptRow) {
  return {
    attempt: a.attempt,
    started_at: isoZ(a.started_at),
    duration_ms: a.duration_ms,
    status_code: a.status_code,
    error: a.error,
    response_body: a.response_body,
    worker: a.worker,
  };
}

function deliveryView(d: repo.DeliveryRow, attempts: repo.AttemptRow[]) {
  return {
    id: d.id,
    webhook_id: d.webhook_id,
    event: d.event,
    event_id: d.event_id,
    event_seq: d.outbox_id,
    subject: d.subject,
    status: d.status,
    attempt_count: d.attempts,
    next_attempt_at: d.status === 'pending' ? isoZ(d.next_attempt_at) : null,
    last_status_code: d.last_status_code,
    last_error: d.last_error,
    event_created_at: isoZ(d.event_created_at),
    created_at: isoZ(d.created_at),
    delivered_at: isoZ(d.delivered_at),
    failed_at: isoZ(d.failed_at),
    payload: d.payload,
    attempts: attempts.filter((a) => a.delivery_id === d.id).map(attemptView),
  };
}

/**
 * Operator view of webhooks under /api/admin (docs/webhooks.md): list and read registrations with
 * delivery counts, pause/resume, list deliveries with every attempt, re-send one, fire `webhook.test`.
 */
export async function webhookAdminRoutes(app: FastifyInstance, ctx: AppContext) {
  registrationRoutes(app, ctx);
  deliveryRoutes(app, ctx);
}

/** The webhook `id`, or 404. */
async function loadWebhook(ctx: AppContext, id: string) {
  const w = await repo.findWebhook(ctx.db, id);
  if (!w) throw notFound('webhook not found');
  return w;
}

/** A delivery of the webhook with its attempts, or 404. */
async function loadDeliveryView(ctx: AppContext, webhookId: string, deliveryId: string) {
  const d = await repo.findDelivery(ctx.db, webhookId, deliveryId);
  if (!d) throw notFound('delivery not found');
  return deliveryView(d, await repo.attemptsOf(ctx.db, [d.id]));
}

/** The registrations: list, read, pause/resume. */
function registrationRoutes(app: FastifyInstance, ctx: AppContext) {
  mount(app, api.list, async (req) => {
    const q = parseOrThrow(listQuery, req.query);
    const rows = await repo.listWebhooksForOperator(
      ctx.db,
      { merchantId: q.merchant_id, accountId: q.account_id, includeDeleted: q.include_deleted === 'true' },
      q.limit ?? 100,
    );
    return { webhooks: rows.map((w) => webhookView(w, w)) };
  });

  mount(app, api.get, async (req) => {
    const { id } = parseOrThrow(idParam, req.params);
    const [row] = await repo.listWebhooksForOperator(ctx.db, { id, includeDeleted: true }, 1);
    if (!row) throw notFound('webhook not found');
    return webhookView(row, row);
  });

  mount(app, api.patch, async (req) => {
    const { id } = parseOrThrow(idParam, req.params);
    const body = parseOrThrow(patchBody, req.body);
    const w = await loadWebhook(ctx, id);
    if (w.deleted_at) throw conflict('webhook is deleted');
    const updated = await ctx.db.transaction((tx) => repo.setWebhookActive(tx, id, body.is_active));
    if (!updated) throw conflict('webhook is deleted');
    return webhookView(updated);
  });
}

/** A webhook's deliveries with their attempts: list, read, re-send one, fire `webhook.test`. */
function deliveryRoutes(app: FastifyInstance, ctx: AppContext) {
  mount(app, api.deliveries, async (req) => {
    const { id } = parseOrThrow(idParam, req.params);
    const q = parseOrThrow(deliveriesQuery, req.query);
    await loadWebhook(ctx, id);
    const limit = q.limit ?? 50;
    const rows = await repo.listDeliveries(ctx.db, id, { status: q.status, before: q.before, limit });
    const attempts = await repo.attemptsOf(ctx.db, rows.map((d) => d.id));
    return {
      deliveries: rows.map((d) => deliveryView(d, attempts)),
      next_before: rows.length === limit ? rows[rows.length - 1]!.outbox_id : null,
    };
  });

  mount(app, api.delivery, async (req) => {
    const { id, delivery_id } = parseOrThrow(deliveryParam, req.params);
    await loadWebhook(ctx, id);
    return loadDeliveryView(ctx, id, delivery_id);
  });

  mount(app, api.resend, async (req, reply) => {
    const { id, delivery_id } = parseOrThrow(deliveryParam, req.params);
    const w = await loadWebhook(ctx, id);
    if (w.deleted_at) throw conflict('webhook is deleted');
    await loadDeliveryView(ctx, id, delivery_id);
    await resendDelivery(ctx, w, delivery_id);
    return reply.code(202).send(await loadDeliveryView(ctx, id, delivery_id));
  });

  mount(app, api.test, async (req, reply) => {
    const { id } = parseOrThrow(idParam, req.params);
    const w = await loadWebhook(ctx, id);
    const deliveryId = await sendTestEvent(ctx, w, 'administration');
    return reply.code(202).send(await loadDeliveryView(ctx, id, deliveryId));
  });
}
