import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MemoryFixedWindow, RedisFixedWindow, type FixedWindowCounter } from '../../src/ratelimit/fixedWindow.js';
import { merchantWithKey, type MerchantFixture } from '../helpers/client.js';
import { openTestRedis, REDIS_VARIANTS } from '../helpers/redis.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { pipelineTestRoutes } from './testRoutes.js';

const TOO_MANY = { error: { status: 429, message: 'Too many requests. Please try again later.' } };

/** For the enclosing suite: a test server allowing 3 requests a minute on `variant`'s store, and a merchant. */
function limitedServer(variant: (typeof REDIS_VARIANTS)[number], ready: (s: TestServer, m: MerchantFixture) => void) {
  let s: TestServer | undefined;
  let closeRedis = async () => {};
  beforeAll(async () => {
    const r = variant === 'redis' ? await openTestRedis() : undefined;
    if (r) closeRedis = r.close;
    s = await startTestServer({ env: { RATE_LIMIT_PER_MINUTE: '3' }, externalPlugins: [pipelineTestRoutes], ...(r ? { redis: r.redis } : {}) });
    ready(s, await merchantWithKey(s));
  });
  afterAll(async () => {
    await s?.close();
    await closeRedis();
  });
}

describe.each(REDIS_VARIANTS)('pipeline stage 6, rate limit (%s store)', (variant) => {
  let s: TestServer;
  let m: MerchantFixture;
  limitedServer(variant, (server, merchant) => ((s = server), (m = merchant)));

  it('counts GETs and POSTs per client IP, sends x-ratelimit-remaining on 2xx, then 429 with Retry-After: 60', async () => {
    // Windows are fixed 60-second slots; avoid starting right at a boundary.
    const secondsIntoWindow = (Date.now() / 1000) % 60;
    if (secondsIntoWindow > 58) await new Promise((r) => setTimeout(r, (61 - secondsIntoWindow) * 1000));
    const a = await m.client.get('/test/ping');
    expect(a.status).toBe(200);
    expect(a.headers.get('x-ratelimit-remaining')).toBe('2');
    const b = await m.client.post('/test/echo', { x: 1 });
    expect(b.headers.get('x-ratelimit-remaining')).toBe('1');
    // A 4xx answer that passed the limiter carries no header but counts.
    const c = await m.client.post('/test/execute', { x: 1 }, { headers: { 'x-key-case': 'snake' } , idempotencyKey: undefined });
    expect(c.status).toBe(201);
    expect(c.headers.get('x-ratelimit-remaining')).toBe('0');
    const d = await m.client.get('/test/ping');
    expect(d.status).toBe(429);
    expect(d.body).toEqual(TOO_MANY);
    expect(d.headers.get('retry-after')).toBe('60');
    expect(d.headers.get('x-ratelimit-remaining')).toBeNull();
    // Another key from the same IP shares the IP's window.
    const other = await merchantWithKey(s);
    expect((await other.client.get('/test/ping')).status).toBe(429);
  });

  it('GET /balance never touches the limiter', async () => {
    // The window is exhausted by the previous test (same 60-second slot, same IP).
    for (let i = 0; i < 5; i++) {
      const res = await m.client.get('/balance');
      expect(res.status).toBe(200);
      expect(res.headers.get('x-ratelimit-remaining')).toBeNull();
    }
  });
});

describe.each(REDIS_VARIANTS)('fixed-window counter (%s)', (variant) => {
  let now = Date.parse('2026-11-21T10:00:05Z');
  const clock = { now: () => new Date(now) };
  async function counters(): Promise<{ a: FixedWindowCounter; b: FixedWindowCounter; close(): Promise<void> }> {
    if (variant === 'memory') {
      const c = new MemoryFixedWindow(clock);
      return { a: c, b: c, close: async () => {} };
    }
    const r = await openTestRedis();
    return { a: new RedisFixedWindow(r.redis, clock), b: new RedisFixedWindow(r.redis, clock), close: r.close };
  }

  it('shares one window between processes, resets at the window boundary, reports reset and retry-after', async () => {
    const { a, b, close } = await counters();
    try {
      const hits = [];
      for (let i = 0; i < 5; i++) hits.push(await (i % 2 ? a : b).hit('ip:1', 4, 60));
      expect(hits.map((h) => h.allowed)).toEqual([true, true, true, true, false]);
      expect(hits.map((h) => h.remaining)).toEqual([3, 2, 1, 0, 0]);
      expect(hits[0]!.resetAt).toBe(Date.parse('2026-11-21T10:01:00Z') / 1000);
      expect(hits[0]!.retryAfter).toBe(55);
      expect((await a.hit('ip:2', 4, 60)).remaining).toBe(3); // other keys are independent
      now += 55_000; // next window
      expect((await a.hit('ip:1', 4, 60)).remaining).toBe(3);
    } finally {
      await close();
    }
  });

  it('windows of different lengths on one counter do not reset each other', async () => {
    const { a, close } = await counters();
    try {
      expect((await a.hit('k:hour', 10, 3600)).remaining).toBe(9);
      now += 120_000; // two minute windows later, same hour
      expect((await a.hit('k:minute', 10, 60)).remaining).toBe(9);
      now += 15_000;
      expect((await a.hit('k:hour', 10, 3600)).remaining).toBe(8);
    } finally {
      await close();
    }
  });

  it('counts concurrent hits exactly', async () => {
    const { a, close } = await counters();
    try {
      const results = await Promise.all(Array.from({ length: 50 }, () => a.hit('ip:concurrent', 20, 60)));
      expect(results.filter((r) => r.allowed)).toHaveLength(20);
    } finally {
      await close();
    }
  });
});

/**
 * With Redis, a v2 request's nonce claim and its rate-limit count are one script (one round trip).
 * The answers must be those of the stages run one after the other, on both stores: a conflicting
 * nonce (409, stage 5) is never counted, and a body stage 5 refuses (400, U+0000) consumes its
 * nonce but is not counted either.
 */
describe.each(REDIS_VARIANTS)('stages 5 and 6 together: v2 nonce claim and rate limit (%s store)', (variant) => {
  let s: TestServer;
  let m: MerchantFixture;
  limitedServer(variant, (server, merchant) => ((s = server), (m = merchant)));

  it('a conflicting nonce and a refused body are not counted; a refused body still consumes its nonce', async () => {
    const secondsIntoWindow = (Date.now() / 1000) % 60;
    if (secondsIntoWindow > 57) await new Promise((r) => setTimeout(r, (61 - secondsIntoWindow) * 1000));
    const nonce = `nonce-${Date.now()}-aaaaaaaaaaaa`;
    const first = await m.client.post('/test/echo', { x: 1 }, { sign: 'v2', nonce });
    expect(first.status).toBe(200);
    expect(first.headers.get('x-ratelimit-remaining')).toBe('2');
    const conflict = await m.client.post('/test/echo', { x: 2 }, { sign: 'v2', nonce });
    expect(conflict.status).toBe(409);
    expect(conflict.body).toEqual({ worked: false, detail: 'X-Request-Nonce was already used for a different request' });

    const nulNonce = `nonce-${Date.now()}-bbbbbbbbbbbb`;
    const refused = await m.client.post('/test/echo', '{"x":"a\\u0000b"}', { sign: 'v2', nonce: nulNonce });
    expect(refused.status).toBe(400);
    const reused = await m.client.post('/test/echo', { x: 3 }, { sign: 'v2', nonce: nulNonce });
    expect(reused.status).toBe(409);

    const second = await m.client.post('/test/echo', { x: 4 }, { sign: 'v2' });
    expect(second.status).toBe(200);
    expect(second.headers.get('x-ratelimit-remaining')).toBe('1');
  });
});
