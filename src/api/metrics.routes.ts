import type { FastifyInstance } from 'fastify';
import { requireAdminToken } from '../admin/routes.js';
import type { AppContext } from '../context.js';

/**
 * `GET /metrics`: this process's metrics in the Prometheus text format, behind the admin bearer
 * token (docs/metrics.md). A token-less listener for a scraper on a private network is
 * METRICS_PORT (main.ts, `startMetricsListener`).
 */
export function metricsRoutes(ctx: AppContext) {
  return async function plugin(app: FastifyInstance) {
    app.get('/metrics', { onRequest: requireAdminToken(ctx) }, async (_req, reply) => {
      const text = await ctx.metrics.text();
      return reply.header('content-type', ctx.metrics.contentType).header('cache-control', 'no-store').send(text);
    });
  };
}
