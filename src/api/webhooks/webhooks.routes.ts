import type { FastifyInstance } from 'fastify';
import type { AppContext } from '../../context.js';
import { principal, recordAnswer } from '../../external/pipeline.js';
import { badRequest, notFound } from '../../http/errors.js';
import { mount } from '../../http/routeSpec.js';
import * as repo from '../../webhooks/repository.js';
import { catalogView, listView } from '../../webhooks/registration.js';
import { createWebhook, deleteWebhook } from '../../webhooks/service.js';
import { UUID, webhooksApi as api } from './webhooks.api.js';

export { UUID } from './webhooks.api.js';

/**
 * POST/GET /webhooks, DELETE /webhooks/:id, GET /webhooks/events (spec section Webhooks).
 * Scope: a webhook registered with an account key belongs to that account (its events only); one
 * registered with a merchant-wide key is global for the merchant. An account key sees and deletes its
 * account's webhooks; a merchant-wide key all of its merchant's.
 */
export async function webhookRoutes(app: FastifyInstance, ctx: AppContext) {
  const scopeOf = (req: Parameters<typeof principal>[0]): repo.WebhookScope => {
    const p = principal(req);
    return { merchantId: p.merchantId, accountId: p.keyAccountId };
  };

  mount(app, api.create, async (req, reply) => {
    const p = principal(req);
    const payload = await createWebhook(ctx, { merchantId: p.merchantId, accountId: p.keyAccountId, clientId: p.clientId }, req.body, (tx, answer) =>
      recordAnswer(req, tx, 201, answer),
    );
    return reply.code(201).send(payload);
  });

  mount(app, api.list, async (req) => {
    const rows = await repo.listWebhooks(ctx.db, scopeOf(req));
    return rows.map(listView);
  });

  // The spec names no permission: any authenticated key may read the catalog.
  mount(app, api.catalog, async () => catalogView());

  mount(app, api.delete, async (req, reply) => {
    const { id } = req.params as { id: string };
    if (!UUID.test(id)) throw badRequest('id must be a valid UUID');
    const scope = scopeOf(req);
    const deleted = await deleteWebhook(ctx, scope, id);
    if (!deleted) throw notFound('webhook not found');
    return reply.code(204).send();
  });
}
