import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  BOLETO_RATE_LIMITS,
  BoletoRateLimiter,
  bucketFor,
  effectiveLimit,
  FallbackRateLimitStore,
  MemoryRateLimitStore,
  RedisRateLimitStore,
  type RateLimitStore,
} from '../../src/boleto/rateLimit.js';
import { openTestRedis, REDIS_VARIANTS } from '../helpers/redis.js';

/** The limiter's stores and arithmetic, without HTTP (the HTTP behaviour is in rate-limit.test.ts). */
describe.each(REDIS_VARIANTS)('boleto rate-limit store (%s)', (variant) => {
  let store: RateLimitStore;
  let close = async () => {};
  beforeAll(async () => {
    if (variant === 'redis') {
      const r = await openTestRedis();
      store = new RedisRateLimitStore(r.redis);
      close = r.close;
    } else {
      store = new MemoryRateLimitStore();
    }
  });
  afterAll(() => close());

  it('counts per key, atomically under concurrency', async () => {
    const hits = await Promise.all(Array.from({ length: 200 }, () => store.hit('k:concurrent', 60_000)));
    expect(hits.map((h) => h.count).sort((a, b) => a - b)).toEqual(Array.from({ length: 200 }, (_, i) => i + 1));
    expect((await store.hit('k:other', 60_000)).count).toBe(1);
    expect((await store.hit('k:other', 60_000, 41)).count).toBe(42);
  });

  it('a counter expires after its time to live', async () => {
    if (variant === 'redis') {
      await store.hit('k:short', 1);
      // PEXPIRE of 1 ms: gone by the next round trip or two.
      let count = 0;
      for (let i = 0; i < 50 && count !== 1; i++) count = (await store.hit('k:short', 1)).count;
      expect(count).toBe(1);
    } else {
      let now = 1_000_000;
      const memory = new MemoryRateLimitStore(() => now);
      await memory.hit('k', 1000);
      expect((await memory.hit('k', 1000)).count).toBe(2);
      now += 1000;
      expect((await memory.hit('k', 1000)).count).toBe(1);
      now += 60_000;
      await memory.hit('k2', 1000);
      expect(memory.size).toBe(1); // the expired counter was swept
    }
  });
});

describe('BoletoRateLimiter', () => {
  const minute = bucketFor('POST /boletos');
  const hour = bucketFor('POST /settlements/trigger');

  it('multiplies the production table by the environment: x1, x0.1, local counted but never refused', () => {
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

  it('uses fixed windows aligned to the clock and reports their end', async () => {
    let now = Date.UTC(2026, 10, 21, 10, 15, 30, 250);
    const limiter = new BoletoRateLimiter(new MemoryRateLimitStore(() => now), 'homologation', () => now);
    for (let i = 1; i <= 10; i++) {
      const d = await limiter.consume('key:1', minute);
      expect(d).toMatchObject({ limit: 10, remaining: 10 - i, allowed: true, resetSeconds: Date.UTC(2026, 10, 21, 10, 16) / 1000, retryAfterSeconds: 30 });
    }
    expect(await limiter.consume('key:1', minute)).toMatchObject({ remaining: 0, allowed: false, retryAfterSeconds: 30 });
    expect((await limiter.consume('key:2', minute)).allowed).toBe(true);
    const trigger = await limiter.consume('key:1', hour);
    expect(trigger).toMatchObject({ limit: 1, remaining: 0, allowed: true, resetSeconds: Date.UTC(2026, 10, 21, 11) / 1000, retryAfterSeconds: 2670 });
    now = Date.UTC(2026, 10, 21, 10, 16);
    expect(await limiter.consume('key:1', minute)).toMatchObject({ remaining: 9, allowed: true, retryAfterSeconds: 60 });
    expect((await limiter.consume('key:1', hour)).allowed).toBe(false);
  });

  it('in local, counts and reports but never refuses', async () => {
    const now = Date.UTC(2026, 0, 1);
    const limiter = new BoletoRateLimiter(new MemoryRateLimitStore(() => now), 'local', () => now);
    for (let i = 0; i < 10; i++) await limiter.consume('key:1', hour);
    expect(await limiter.consume('key:1', hour)).toMatchObject({ limit: 10, remaining: 0, allowed: true });
  });

  it('falls back to process memory while the shared store fails', async () => {
    const broken = new Redis('redis://127.0.0.1:1', { lazyConnect: true, enableOfflineQueue: false, maxRetriesPerRequest: 0 });
    const failures: Error[] = [];
    const store = new FallbackRateLimitStore(new RedisRateLimitStore(broken), new MemoryRateLimitStore(), (err) => failures.push(err));
    expect((await store.hit('k', 60_000)).count).toBe(1);
    expect((await store.hit('k', 60_000)).count).toBe(2);
    expect(failures).toHaveLength(1); // reported once, not on every request
    broken.disconnect();
  });
});
