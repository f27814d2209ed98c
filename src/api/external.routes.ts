import { notFoundHandler } from '../http/errorHandler.js';
import type { FastifyInstance } from 'fastify';
import type { AppContext } from '../context.js';
import { combinedNonceAndRate } from '../auth/nonceStore.js';
import { installPipeline } from '../external/pipeline.js';
import { accountRoutes } from '../external/account.routes.js';
import { eventFeedRoutes } from './events/feed.routes.js';
import { medRoutes } from './med/routes.js';
import { chargeRoutes } from './pix/charges.routes.js';
import { pixKeyRoutes } from './pix/keys.routes.js';
import { pixOutRoutes } from './pix/routes.js';
import { webhookRoutes } from './webhooks/webhooks.routes.js';
import { tefRoutes } from './tef/routes.js';

/** Extra route plugins mounted behind the pipeline (tests use it to exercise the stages). */
export type ExternalPlugin = (app: FastifyInstance, ctx: AppContext) => Promise<void>;

/** The merchant API of the spec, under /api/external, every route behind the request pipeline. */
export function externalRoutes(ctx: AppContext, extra: readonly ExternalPlugin[] = []) {
  return async function plugin(app: FastifyInstance) {
    installPipeline(app, {
      ctx,
      nonces: ctx.nonces,
      rateLimiter: ctx.rateCounter,
      idempotency: ctx.idempotency,
      nonceAndRate: combinedNonceAndRate(ctx.nonces, ctx.rateCounter),
    });
    app.setNotFoundHandler(notFoundHandler);
    await accountRoutes(app, ctx);
    await chargeRoutes(app, ctx);
    await pixKeyRoutes(app, ctx);
    await pixOutRoutes(app, ctx);
    await medRoutes(app, ctx);
    await webhookRoutes(app, ctx);
    await eventFeedRoutes(app, ctx);
    await tefRoutes(app, ctx);
    for (const register of extra) await register(app, ctx);
  };
}
