import { Redis } from 'ioredis';
import { describe, expect, it } from 'vitest';
import {
  BOLETO_RATE_LIMITS,
  BoletoRateLimiter,
  bucketFor,
  effectiveLimit,
  FallbackWindowCounter,
} from '../../src/api/boleto/rateLimit.js';
import { MemoryFixedWindow, RedisFixedWindow } from '../../src/ratelimit/fixedWindow.js';
import { ManualClock } from './helpers.js';

/**
 * The boleto limiter's arithmetic on the app's fixed-window counter (the counters themselves are
 * tested in test/pipeline/ratelimit.test.ts; the HTTP behaviour in rate-limit.test.ts).
 */
describe('BoletoRateLimiter', () => {
  const minute = bucketFor('POST /boletos');
  const hour = bucketFor('POST /settlements/trigger');

  it('multiplies the production table by the environment: x1, x0.1', () => {
    const rows = Object.entries(BOLETO_RATE_LIMITS).map(([name, row]) => [name, effectiveLimit(row.limit, 'production'), effectiveLimit(row.limit, 'homologation')]);
    expect(rows).toEqual([
      ['POST /boletos', 100, 10],
      ['GET /boletos', 1000, 100],
      ['GET /boletos/:nosso_numero', 1000, 100],
      ['PATCH /boletos/:nosso_numero', 100, 10],
      ['DELETE /boletos/:nosso_numero', 100, 10],
      ['POST /boletos/:nosso_numero/pay', 100, 10],
      ['GET /settlements', 1000, 100],
      ['GET /settlements/:id', 1000, 100],
      ['POST /settlements/trigger', 10, 1],
      ['GET /health', 1000, 100],
    ]);
    expect(BOLETO_RATE_LIMITS['POST /settlements/trigger'].windowSeconds).toBe(3600);
    expect(effectiveLimit(100, 'local')).toBe(100);
  });

  it('counts per caller and endpoint in windows aligned to the clock; minute traffic does not reset the hour', async () => {
    const clock = new ManualClock(Date.UTC(2026, 10, 21, 10, 15, 30, 250));
    const limiter = new BoletoRateLimiter(new MemoryFixedWindow(clock), 'homologation');
    for (let i = 1; i <= 10; i++) {
      const d = await limiter.consume('key:1', minute);
      expect(d).toMatchObject({ limit: 10, remaining: 10 - i, allowed: true, resetAt: Date.UTC(2026, 10, 21, 10, 16) / 1000, retryAfter: 30, windowSeconds: 60 });
    }
    expect(await limiter.consume('key:1', minute)).toMatchObject({ remaining: 0, allowed: false, retryAfter: 30 });
    expect((await limiter.consume('key:2', minute)).allowed).toBe(true);
    expect((await limiter.consume('key:1', bucketFor('GET /boletos'))).allowed).toBe(true);
    expect(await limiter.consume('key:1', hour)).toMatchObject({ limit: 1, remaining: 0, allowed: true, resetAt: Date.UTC(2026, 10, 21, 11) / 1000, retryAfter: 2670 });
    clock.ms = Date.UTC(2026, 10, 21, 10, 16);
    expect(await limiter.consume('key:1', minute)).toMatchObject({ remaining: 9, allowed: true, retryAfter: 60 });
    expect((await limiter.consume('key:1', hour)).allowed).toBe(false);
  });

  it('in local, counts and reports production’s numbers but never refuses', async () => {
    const limiter = new BoletoRateLimiter(new MemoryFixedWindow(new ManualClock(Date.UTC(2026, 0, 1))), 'local');
    for (let i = 0; i < 10; i++) await limiter.consume('key:1', hour);
    expect(await limiter.consume('key:1', hour)).toMatchObject({ limit: 10, remaining: 0, allowed: true });
  });

  it('falls back to process memory while Redis fails, reporting it once', async () => {
    const clock = new ManualClock(Date.UTC(2026, 0, 1));
    const broken = new Redis('redis://127.0.0.1:1', { lazyConnect: true, enableOfflineQueue: false, maxRetriesPerRequest: 0 });
    const failures: Error[] = [];
    const counter = new FallbackWindowCounter(new RedisFixedWindow(broken, clock), new MemoryFixedWindow(clock), (err) => failures.push(err));
    const limiter = new BoletoRateLimiter(counter, 'production');
    expect(await limiter.consume('key:1', hour)).toMatchObject({ limit: 10, remaining: 9, allowed: true });
    expect(await limiter.consume('key:1', hour)).toMatchObject({ remaining: 8 });
    expect(failures).toHaveLength(1);
    broken.disconnect();
  });
});
