import type { Redis } from 'ioredis';
import type { AppEnv } from '../config.js';

/**
 * Rate limits of the boleto central API: the spec's production table, per API key and endpoint, in
 * fixed windows aligned to the clock (a minute window starts at :00; the trigger's hour at the top
 * of the hour), multiplied by the environment.
 */
export const BOLETO_RATE_LIMITS = {
  'POST /boletos': { limit: 100, windowSeconds: 60 },
  'GET /boletos': { limit: 1000, windowSeconds: 60 },
  'GET /boletos/:nosso_numero': { limit: 1000, windowSeconds: 60 },
  'PATCH /boletos/:nosso_numero': { limit: 100, windowSeconds: 60 },
  'DELETE /boletos/:nosso_numero': { limit: 100, windowSeconds: 60 },
  'POST /boletos/:nosso_numero/pay': { limit: 100, windowSeconds: 60 },
  'GET /settlements': { limit: 1000, windowSeconds: 60 },
  'GET /settlements/:id': { limit: 1000, windowSeconds: 60 },
  'POST /settlements/trigger': { limit: 10, windowSeconds: 3600 },
  'GET /health': { limit: 1000, windowSeconds: 60 },
} as const satisfies Record<string, { limit: number; windowSeconds: number }>;

export type BoletoEndpoint = keyof typeof BOLETO_RATE_LIMITS;

/**
 * Requests to paths under the prefix that are no endpoint (answered 404) are counted too, so that
 * every answer carries the headers; they share one bucket with the read endpoints' limit.
 */
export const UNMATCHED_BUCKET = { name: 'unmatched', limit: 1000, windowSeconds: 60 } as const;

/**
 * Multiplier per environment, in tenths (integer arithmetic): production x1, homologation x0.1.
 * `local` is unlimited: requests are counted and the headers sent (with production's numbers) so a
 * client can be developed against them, but no request is refused.
 */
const MULTIPLIER_TENTHS: Record<AppEnv, number> = { production: 10, homologation: 1, local: 10 };

export function effectiveLimit(productionLimit: number, appEnv: AppEnv): number {
  return Math.max(1, Math.floor((productionLimit * MULTIPLIER_TENTHS[appEnv]) / 10));
}

export function enforces(appEnv: AppEnv): boolean {
  return appEnv !== 'local';
}

/** One counter increment in a fixed window. */
export interface WindowHit {
  /** Requests counted in this window, this one included. */
  count: number;
}

/**
 * Where window counters live: Redis when configured (shared by every process), process memory
 * otherwise. `hit` adds `by` (default 1) to the counter `key` and returns the new value; the
 * counter must outlive `ttlMs`.
 */
export interface RateLimitStore {
  hit(key: string, ttlMs: number, by?: number): Promise<WindowHit>;
}

/** Counters in process memory; expired windows are swept as new ones are created. */
export class MemoryRateLimitStore implements RateLimitStore {
  private readonly counters = new Map<string, { count: number; expiresAtMs: number }>();
  private lastSweepMs = 0;

  constructor(private readonly nowMs: () => number = Date.now) {}

  async hit(key: string, ttlMs: number, by = 1): Promise<WindowHit> {
    const now = this.nowMs();
    if (now - this.lastSweepMs > 10_000) this.sweep(now);
    let entry = this.counters.get(key);
    if (!entry || entry.expiresAtMs <= now) {
      entry = { count: 0, expiresAtMs: now + ttlMs };
      this.counters.set(key, entry);
    }
    entry.count += by;
    return { count: entry.count };
  }

  get size(): number {
    return this.counters.size;
  }

  private sweep(now: number) {
    this.lastSweepMs = now;
    for (const [key, entry] of this.counters) if (entry.expiresAtMs <= now) this.counters.delete(key);
  }
}

/**
 * Counters in Redis: one round trip per hit (MULTI INCRBY + PEXPIRE). The expiry is relative, so
 * it does not depend on Redis's clock agreeing with the application's.
 */
export class RedisRateLimitStore implements RateLimitStore {
  constructor(private readonly redis: Redis) {}

  async hit(key: string, ttlMs: number, by = 1): Promise<WindowHit> {
    const result = await this.redis.multi().incrby(key, by).pexpire(key, ttlMs).exec();
    if (!result) throw new Error('rate-limit transaction aborted');
    const [incr] = result;
    if (!incr || incr[0]) throw incr?.[0] ?? new Error('rate-limit INCRBY failed');
    return { count: Number(incr[1]) };
  }
}

/**
 * Redis first; while Redis fails, the process's own counters. Limits are then per process rather
 * than shared, which keeps the API answering (with its headers) through a Redis outage. Failures
 * are reported to `onFailure` at most once a minute.
 */
export class FallbackRateLimitStore implements RateLimitStore {
  private lastReportMs = -Infinity;

  constructor(
    private readonly primary: RateLimitStore,
    private readonly fallback: RateLimitStore,
    private readonly onFailure: (err: Error) => void = () => {},
  ) {}

  async hit(key: string, ttlMs: number, by?: number): Promise<WindowHit> {
    try {
      return await this.primary.hit(key, ttlMs, by);
    } catch (err) {
      const now = Date.now();
      if (now - this.lastReportMs >= 60_000) {
        this.lastReportMs = now;
        this.onFailure(err as Error);
      }
      return this.fallback.hit(key, ttlMs, by);
    }
  }
}

/** What a request learns from the limiter: the header values and whether it may proceed. */
export interface RateLimitDecision {
  limit: number;
  remaining: number;
  /** Unix seconds at which the window ends. */
  resetSeconds: number;
  /** Seconds until the window ends (at least 1), for Retry-After. */
  retryAfterSeconds: number;
  allowed: boolean;
  windowSeconds: number;
}

export interface RateLimitBucket {
  /** Stable name of the row (`POST /boletos`) or of the unmatched bucket. */
  name: string;
  limit: number;
  windowSeconds: number;
}

export function bucketFor(endpoint: BoletoEndpoint | undefined): RateLimitBucket {
  if (endpoint === undefined) return UNMATCHED_BUCKET;
  return { name: endpoint, ...BOLETO_RATE_LIMITS[endpoint] };
}

/** Slack added to a counter's lifetime so it never expires before its window ends. */
const TTL_SLACK_MS = 5_000;

export class BoletoRateLimiter {
  constructor(
    readonly store: RateLimitStore,
    private readonly appEnv: AppEnv,
    private readonly nowMs: () => number,
  ) {}

  /** Store key of a caller's counter in the window that contains `nowMs`. */
  static key(caller: string, bucket: RateLimitBucket, windowStartMs: number): string {
    return `boleto:rl:${caller}:${bucket.name}:${windowStartMs / 1000}`;
  }

  /** The window that contains `nowMs`: [start, end). */
  static window(bucket: RateLimitBucket, nowMs: number): { startMs: number; endMs: number } {
    const windowMs = bucket.windowSeconds * 1000;
    const startMs = Math.floor(nowMs / windowMs) * windowMs;
    return { startMs, endMs: startMs + windowMs };
  }

  limitOf(bucket: RateLimitBucket): number {
    return effectiveLimit(bucket.limit, this.appEnv);
  }

  /** Counts one request of `caller` (an API key or, unauthenticated, an IP) against `bucket`. */
  async consume(caller: string, bucket: RateLimitBucket): Promise<RateLimitDecision> {
    const now = this.nowMs();
    const { startMs, endMs } = BoletoRateLimiter.window(bucket, now);
    const { count } = await this.store.hit(BoletoRateLimiter.key(caller, bucket, startMs), endMs - now + TTL_SLACK_MS);
    const limit = this.limitOf(bucket);
    return {
      limit,
      remaining: Math.max(0, limit - count),
      resetSeconds: Math.ceil(endMs / 1000),
      retryAfterSeconds: Math.max(1, Math.ceil((endMs - now) / 1000)),
      allowed: count <= limit || !enforces(this.appEnv),
      windowSeconds: bucket.windowSeconds,
    };
  }
}
