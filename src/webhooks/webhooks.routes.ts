import type { FastifyInstance } from 'fastify';
import type { AppContext } from '../context.js';
import { principal, recordAnswer } from '../external/pipeline.js';
import { badRequest, notFound, unprocessable } from '../http/errors.js';
import { newUuid } from '../lib/ids.js';
import { parseAllowedHosts } from './destination.js';
import * as repo from './repository.js';
import { mount } from '../http/routeSpec.js';
import { UUID, webhooksApi as api } from './webhooks.api.js';
import { catalogView, createView, listView, MAX_WEBHOOKS_PER_MERCHANT, validateWebhook } from './registration.js';

export { UUID } from './webhooks.api.js';

/**
 * POST/GET /webhooks, DELETE /webhooks/:id, GET /webhooks/events (spec section Webhooks).
 * Scope: a webhook registered with an account key belongs to that account (its events only); one
 * registered with a merchant-wide key is global for the merchant. An account key sees and deletes its
 * account's webhooks; a merchant-wide key all of its merchant's.
 */
export async function webhookRoutes(app: FastifyInstance, ctx: AppContext) {
  const allowed = parseAllowedHosts(ctx.config.webhookAllowedHosts);
  const scopeOf = (req: Parameters<typeof principal>[0]): repo.WebhookScope => {
    const p = principal(req);
    return { merchantId: p.merchantId, accountId: p.keyAccountId };
  };

  mount(app, api.create, async (req, reply) => {
    const input = validateWebhook(req.body, allowed);
    const p = principal(req);
    const payload = await ctx.db.transaction(async (tx) => {
      await repo.lockMerchantWebhooks(tx, p.merchantId);
      if ((await repo.countLiveWebhooks(tx, p.merchantId)) >= MAX_WEBHOOKS_PER_MERCHANT) {
        throw unprocessable(`webhook limit reached: at most ${MAX_WEBHOOKS_PER_MERCHANT} webhooks per merchant`);
      }
      const row = await repo.insertWebhook(tx, {
        id: newUuid(),
        merchantId: p.merchantId,
        accountId: p.keyAccountId,
        clientId: p.clientId,
        url: input.url,
        events: input.events,
        secret: input.secret,
        description: input.description,
        allowInsecure: input.allowInsecure,
      });
      const answer = createView(row);
      await recordAnswer(req, tx, 201, answer);
      return answer;
    });
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
    const deleted = await ctx.db.transaction((tx) => repo.deleteWebhook(tx, scope, id.toLowerCase()));
    if (!deleted) throw notFound('webhook not found');
    return reply.code(204).send();
  });
}
