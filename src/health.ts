import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import type { AppContext } from './context.js';
import { defineRoutes, mount } from './http/routeSpec.js';

export const healthApi = defineRoutes({
  healthz: {
    method: 'GET',
    path: '/healthz',
    operationId: 'healthz',
    tag: 'Health',
    summary: 'The process is up',
    responses: { 200: { description: 'Up', schema: z.object({ status: z.literal('ok') }) } },
  },
  readyz: {
    method: 'GET',
    path: '/readyz',
    operationId: 'readyz',
    tag: 'Health',
    summary: 'The database and (when configured) Redis answer',
    description:
      'Ready (200) when the database answers and, when `REDIS_URL` or `REDIS_SENTINELS` is configured, Redis answers too (operator contract); 503 `not ready` otherwise. With `READYZ_REDIS=degraded`, Redis (rate-limit windows, signature-v2 nonces) down or hung leaves the instance ready with `status: degraded` and `checks.redis: unavailable`: every instance shares that Redis, so taking them all out of a balancer turns a partial degradation (rate limiter open, v2 signatures answered 503) into a full outage.',
    responses: {
      200: { description: 'Ready (`degraded`: Redis unavailable)', schema: z.object({ status: z.enum(['ready', 'degraded']), checks: z.record(z.string(), z.string()) }) },
      503: { description: 'Not ready', schema: z.object({ status: z.literal('not ready'), checks: z.record(z.string(), z.string()) }) },
    },
  },
});

const PROBE_TIMEOUT_MS = 2000;

function withTimeout<T>(promise: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout;
  return Promise.race([
    promise,
    new Promise<T>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`timed out after ${ms} ms`)), ms);
    }),
  ]).finally(() => clearTimeout(timer));
}

/**
 * `/healthz`: the process is up. `/readyz`: the database answers, and Redis when configured — or,
 * with READYZ_REDIS=degraded, Redis is reported but does not make the instance not-ready
 * (`degraded`; docs/decisions.md, "`/readyz` when only Redis is down").
 */
export function healthRoutes(ctx: AppContext) {
  return async function plugin(app: FastifyInstance) {
    mount(app, healthApi.healthz, async () => ({ status: 'ok' }));
    mount(app, healthApi.readyz, async (req, reply) => {
      const checks: Record<string, string> = {};
      let ready = true;
      let degraded = false;
      // A probe answers 'unavailable', never the driver's error text (it can name hosts, users,
      // schemas); the cause goes to the log.
      try {
        await withTimeout(ctx.db.ping(), PROBE_TIMEOUT_MS);
        checks.database = 'ok';
      } catch (err) {
        ready = false;
        checks.database = 'unavailable';
        req.log.warn({ err: (err as Error).message }, 'readiness: database unavailable');
      }
      if (ctx.redis) {
        try {
          await withTimeout(ctx.redis.ping(), PROBE_TIMEOUT_MS);
          checks.redis = 'ok';
        } catch (err) {
          if (ctx.config.readyzRedis === 'degraded') degraded = true;
          else ready = false;
          checks.redis = 'unavailable';
          req.log.warn({ err: (err as Error).message }, 'readiness: redis unavailable');
        }
      } else {
        checks.redis = 'not configured';
      }
      return reply.code(ready ? 200 : 503).send({ status: !ready ? 'not ready' : degraded ? 'degraded' : 'ready', checks });
    });
  };
}
