import type { FastifyRequest } from 'fastify';
import type { Authenticated } from '../../auth/credentials.js';
import type { AppContext } from '../../context.js';

/** What the pipeline's stages read of a request, and what earlier stages left on it. */

export function header(req: FastifyRequest, name: string): string | undefined {
  const v = req.headers[name];
  return Array.isArray(v) ? v[0] : v;
}

export function hasBody(req: FastifyRequest): boolean {
  const length = header(req, 'content-length');
  return (length !== undefined && length !== '0') || header(req, 'transfer-encoding') !== undefined;
}

/** The credentials stage 3 accepted. */
export function auth(req: FastifyRequest): Authenticated {
  if (!req.ext.auth) throw new Error('pipeline stage ran before authentication');
  return req.ext.auth;
}

/** Stage 6 applies: every route but those the spec exempts (GET /balance). */
export function rateLimited(req: FastifyRequest): boolean {
  return req.routeOptions.config.rateLimit !== false;
}

/** The limiter's window for a request: per client IP, RATE_LIMIT_PER_MINUTE a minute. */
export function rateWindow(req: FastifyRequest, ctx: AppContext) {
  return { key: `ext:${req.ext.clientIp}`, limit: ctx.config.rateLimitPerMinute, windowSeconds: 60 };
}

/**
 * The route part of an idempotency scope: the route that runs (its pattern, e.g.
 * `/api/external/med/:id/defense`) and its decoded parameters — never the URL as spelled, so
 * `cash-out`, `cash%2Dout` and `%63ash-out` are one scope.
 */
export function idempotencyScopePath(req: FastifyRequest): string {
  const route = req.routeOptions.url ?? req.url.split('?')[0]!;
  const params = (req.params ?? {}) as Record<string, string>;
  const names = Object.keys(params).sort();
  return names.length === 0 ? route : `${route} ${JSON.stringify(names.map((n) => [n, params[n]]))}`;
}
