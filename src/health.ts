import type { FastifyInstance } from 'fastify';
import type { AppContext } from './context.js';

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

/** `/healthz`: the process is up. `/readyz`: the database (and Redis, when configured) answer. */
export function healthRoutes(ctx: AppContext) {
  return async function plugin(app: FastifyInstance) {
    app.get('/healthz', async () => ({ status: 'ok' }));
    app.get('/readyz', async (req, reply) => {
      const checks: Record<string, string> = {};
      let ready = true;
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
          ready = false;
          checks.redis = 'unavailable';
          req.log.warn({ err: (err as Error).message }, 'readiness: redis unavailable');
        }
      } else {
        checks.redis = 'not configured';
      }
      return reply.code(ready ? 200 : 503).send({ status: ready ? 'ready' : 'not ready', checks });
    });
  };
}
