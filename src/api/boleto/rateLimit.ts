import type { AppEnv } from '../../config.js';
import type { FixedWindowCounter, WindowHit } from '../../ratelimit/fixedWindow.js';
import { monotonicNow } from '../../lib/clock.js';

/**
 * Rate limits of the boleto central API: the spec's production table, per API key and endpoint,
 * multiplied by the environment. Counting uses the app's fixed-window counters (windows aligned to
 * the epoch, so a minute window starts at :00 and the trigger's hour at the top of the hour): the
 * shared Redis counter `ctx.rateCounter` when Redis is configured, process memory otherwise.
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

export interface RateLimitBucket {
  /** The row of the table (`POST /boletos`), or `unmatched`. */
  name: string;
  /** Production limit. */
  limit: number;
  windowSeconds: number;
}

/**
 * Requests to paths under the prefix that are no endpoint (answered 404) are counted too, so that
 * every answer carries the headers; they share one bucket with the read endpoints' limit.
 */
export const UNMATCHED_BUCKET: RateLimitBucket = { name: 'unmatched', limit: 1000, windowSeconds: 60 };

export function bucketFor(endpoint: BoletoEndpoint | undefined): RateLimitBucket {
  if (endpoint === undefined) return UNMATCHED_BUCKET;
  return { name: endpoint, ...BOLETO_RATE_LIMITS[endpoint] };
}

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

/**
 * Shared counters first; while they fail (Redis down), the process's own. Limits are then per
 * process rather than shared, which keeps the API answering with its headers through a Redis
 * outage. Failures are reported to `onFailure` at most once a minute.
 */
export class FallbackWindowCounter implements FixedWindowCounter {
  private lastReportMs = -Infinity;

  constructor(
    private readonly primary: FixedWindowCounter,
    private readonly fallback: FixedWindowCounter,
    private readonly onFailure: (err: Error) => void = () => {},
  ) {}

  async hit(key: string, limit: number, windowSeconds: number): Promise<WindowHit> {
    try {
      return await this.primary.hit(key, limit, windowSeconds);
    } catch (err) {
      const now = monotonicNow();
      if (now - this.lastReportMs >= 60_000) {
        this.lastReportMs = now;
        this.onFailure(err as Error);
      }
      return this.fallback.hit(key, limit, windowSeconds);
    }
  }
}

/** What a request learns from the limiter: the header values and whether it may proceed. */
export interface RateLimitDecision extends WindowHit {
  windowSeconds: number;
}

export class BoletoRateLimiter {
  constructor(
    private readonly counter: FixedWindowCounter,
    private readonly appEnv: AppEnv,
  ) {}

  /** Counter key of a caller (`key:<id>`, or `ip:<address>` without a valid key) on a bucket. */
  static key(caller: string, bucket: RateLimitBucket): string {
    return `boleto:${caller}:${bucket.name}`;
  }

  /** Counts one request of `caller` against `bucket`. */
  async consume(caller: string, bucket: RateLimitBucket): Promise<RateLimitDecision> {
    const hit = await this.counter.hit(BoletoRateLimiter.key(caller, bucket), effectiveLimit(bucket.limit, this.appEnv), bucket.windowSeconds);
    return { ...hit, allowed: hit.allowed || !enforces(this.appEnv), windowSeconds: bucket.windowSeconds };
  }
}
