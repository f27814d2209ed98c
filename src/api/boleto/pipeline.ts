import type { FastifyReply, FastifyRequest } from 'fastify';
import type { CentralKeyRow } from '../../auth/centralKeys.js';
import type { AppContext } from '../../context.js';
import { BoletoError, RATE_LIMITED_MESSAGE, serviceUnavailable } from '../../http/boletoErrors.js';
import {
  BoletoRateLimiter,
  bucketFor,
  FallbackWindowCounter,
  type BoletoEndpoint,
  type RateLimitDecision,
} from './rateLimit.js';
import type { CentralCaller } from '../../boleto/service.js';
import { MemoryFixedWindow } from '../../ratelimit/fixedWindow.js';

/**
 * The request pipeline of the boleto central API, one onRequest hook, before the body is read:
 *   1. API key (X-API-Key)            identifies the caller; missing/invalid/inactive → 401
 *   2. rate limit                     per key and endpoint (per client IP for requests without a
 *                                     valid key); headers on every answer; over the limit → 429
 *   3. Content-Type                   a body must be application/json → 415
 * The 401 is answered after counting, so guessing keys from one address is rate-limited too.
 */

/** Route option `config.boletoEndpoint`: the row of the rate-limit table a route counts against. */
export interface BoletoRouteConfig {
  boletoEndpoint: BoletoEndpoint;
}

const limiters = new WeakMap<AppContext, BoletoRateLimiter>();

/**
 * The boleto limiter of an app context (one per context, so the plugin and tests see the same
 * counters). With Redis: the shared `ctx.rateCounter`, falling back to process memory while Redis
 * fails (the external API fails open instead; this API keeps answering with its headers). Without
 * Redis: process memory.
 */
export function boletoRateLimiter(ctx: AppContext): BoletoRateLimiter {
  let limiter = limiters.get(ctx);
  if (!limiter) {
    const counter = ctx.redis
      ? new FallbackWindowCounter(ctx.rateCounter, new MemoryFixedWindow(ctx.wallClock), (err) =>
          ctx.log.warn({ err: err.message }, 'boleto rate limits: Redis unavailable, counting in process memory'),
        )
      : ctx.rateCounter;
    limiter = new BoletoRateLimiter(counter, ctx.config.appEnv);
    limiters.set(ctx, limiter);
  }
  return limiter;
}

const callers = new WeakMap<FastifyRequest, CentralCaller>();

/** The authenticated caller of a request that passed the pipeline. */
export function callerOf(request: FastifyRequest): CentralCaller {
  const caller = callers.get(request);
  if (!caller) throw new Error('boleto route reached without an authenticated caller');
  return caller;
}

async function authenticate(ctx: AppContext, request: FastifyRequest): Promise<CentralCaller | BoletoError> {
  const header = request.headers['x-api-key'];
  const apiKey = typeof header === 'string' ? header.trim() : '';
  if (apiKey === '') return new BoletoError('UNAUTHORIZED', 'Missing API key. Send it in the X-API-Key header.');
  let key: CentralKeyRow | undefined;
  try {
    key = await ctx.credentials.centralKey(ctx.db, apiKey);
  } catch (err) {
    request.log.error({ err }, 'central key lookup failed');
    return serviceUnavailable('The service cannot check API keys right now; retry after the Retry-After seconds');
  }
  if (!key) return new BoletoError('UNAUTHORIZED', 'Invalid API key');
  if (!key.active) return new BoletoError('UNAUTHORIZED', 'API key is inactive');
  return { id: key.id, name: key.name, accountId: key.account_id };
}

function setRateLimitHeaders(reply: FastifyReply, d: RateLimitDecision) {
  void reply.header('x-ratelimit-limit', String(d.limit));
  void reply.header('x-ratelimit-remaining', String(d.remaining));
  void reply.header('x-ratelimit-reset', String(d.resetAt));
}

function hasBody(request: FastifyRequest): boolean {
  const length = request.headers['content-length'];
  return request.headers['transfer-encoding'] !== undefined || (length !== undefined && length !== '0');
}

export function boletoPipeline(ctx: AppContext) {
  const limiter = boletoRateLimiter(ctx);
  return async function boletoOnRequest(request: FastifyRequest, reply: FastifyReply) {
    const auth = await authenticate(ctx, request);
    const endpoint = (request.routeOptions.config as Partial<BoletoRouteConfig>).boletoEndpoint;
    const caller = auth instanceof BoletoError ? `ip:${request.ip}` : `key:${auth.id}`;
    const decision = await limiter.consume(caller, bucketFor(endpoint));
    setRateLimitHeaders(reply, decision);
    if (!decision.allowed) {
      throw new BoletoError(
        'RATE_LIMITED',
        RATE_LIMITED_MESSAGE,
        { limit: decision.limit, window_seconds: decision.windowSeconds, retry_after_seconds: decision.retryAfter, reset_at: decision.resetAt },
        { 'retry-after': String(decision.retryAfter) },
      );
    }
    if (auth instanceof BoletoError) throw auth;
    callers.set(request, auth);
    if (hasBody(request)) {
      const type = String(request.headers['content-type'] ?? '').split(';')[0]!.trim().toLowerCase();
      if (type !== 'application/json') throw new BoletoError('UNSUPPORTED_MEDIA_TYPE', 'Content-Type must be application/json');
    }
  };
}
