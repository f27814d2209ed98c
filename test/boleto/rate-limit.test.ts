import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { boletoRateLimiter } from '../../src/api/boleto/pipeline.js';
import { BOLETO_RATE_LIMITS, bucketFor, effectiveLimit, type BoletoEndpoint } from '../../src/api/boleto/rateLimit.js';
import type { AppEnv } from '../../src/config.js';
import { openTestRedis, REDIS_VARIANTS } from '../helpers/redis.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { boletoInput, centralClient, centralRequest, inBatches, ManualClock, T0, type Answer, type CentralClient } from './helpers.js';

/**
 * The spec's "Boleto central API rate limits" over real sockets: every row of the table in
 * production (x1) and homologation (x0.1), on the in-memory store and on Redis. The limiter does
 * not touch the database, so these run on PGlite only. The clock is fixed mid-window, so no test
 * straddles a window boundary.
 *
 * Rows of up to 100 requests are exhausted with real requests. For the rows of 1000 (production),
 * the key's counter is first advanced to 998 through the server's own limiter (the same Redis, or
 * the same process-memory counters), then the last two requests and the refused one go over HTTP.
 */
const ROWS = Object.keys(BOLETO_RATE_LIMITS) as BoletoEndpoint[];
const UNKNOWN_SETTLEMENT = '0b9f2a7e-5c1d-4e8f-9a6b-3c2d1e0f9a8b';

/** A request that a key may repeat on each row, and the status it answers below the limit. */
async function requestFor(row: BoletoEndpoint, c: CentralClient, clock: ManualClock): Promise<{ send: () => Promise<Answer>; status: number }> {
  const needsBoleto = row.includes(':nosso_numero');
  let nn = '0';
  if (needsBoleto) {
    const created = await c.call('POST', '/boletos', { boleto: boletoInput(clock) });
    expect(created.status).toBe(201);
    nn = created.body.data.nosso_numero;
  }
  switch (row) {
    case 'POST /boletos':
      return { send: () => c.call('POST', '/boletos', { boleto: boletoInput(clock) }), status: 201 };
    case 'GET /boletos':
      return { send: () => c.call('GET', '/boletos?limit=1'), status: 200 };
    case 'GET /boletos/:nosso_numero':
      return { send: () => c.call('GET', `/boletos/${nn}`), status: 200 };
    case 'PATCH /boletos/:nosso_numero':
      return { send: () => c.call('PATCH', `/boletos/${nn}`, { boleto: { amount_cents: 777 } }), status: 200 };
    case 'DELETE /boletos/:nosso_numero':
      return { send: () => c.call('DELETE', `/boletos/${nn}`), status: 200 };
    case 'POST /boletos/:nosso_numero/pay':
      return { send: () => c.call('POST', `/boletos/${nn}/pay`), status: 200 };
    case 'GET /settlements':
      return { send: () => c.call('GET', '/settlements'), status: 200 };
    case 'GET /settlements/:id':
      return { send: () => c.call('GET', `/settlements/${UNKNOWN_SETTLEMENT}`), status: 404 };
    case 'POST /settlements/trigger':
      return { send: () => c.call('POST', '/settlements/trigger'), status: 200 };
    case 'GET /health':
      return { send: () => c.call('GET', '/health'), status: 200 };
  }
}

function headersOf(a: Answer) {
  return {
    limit: Number(a.headers.get('x-ratelimit-limit')),
    remaining: Number(a.headers.get('x-ratelimit-remaining')),
    reset: Number(a.headers.get('x-ratelimit-reset')),
  };
}

describe.each(REDIS_VARIANTS)('boleto rate limits over HTTP (%s store)', (variant) => {
  describe.each(['production', 'homologation'] as const)('APP_ENV=%s', (appEnv: AppEnv) => {
    let s: TestServer;
    let redis: { redis: Redis; close(): Promise<void> } | undefined;
    const clock = new ManualClock(T0);

    beforeAll(async () => {
      redis = variant === 'redis' ? await openTestRedis() : undefined;
      s = await startTestServer({
        env: { APP_ENV: appEnv, DATABASE_URL: 'postgres://unused/db' },
        clock,
        workers: false,
        ...(redis ? { redis: redis.redis } : {}),
      });
    });
    afterAll(async () => {
      await s?.close();
      await redis?.close();
    });

    /** Window of a row at the clock's time: [start, end) in ms. */
    const windowOf = (row: BoletoEndpoint) => {
      const windowMs = BOLETO_RATE_LIMITS[row].windowSeconds * 1000;
      const startMs = Math.floor(clock.ms / windowMs) * windowMs;
      return { startMs, endMs: startMs + windowMs };
    };

    function expectRateLimited(a: Answer, row: BoletoEndpoint, limit: number) {
      const { endMs } = windowOf(row);
      const retryAfter = Math.ceil((endMs - clock.ms) / 1000);
      expect(a.status).toBe(429);
      expect(a.body).toEqual({
        success: false,
        error: {
          code: 'RATE_LIMITED',
          message: 'Too many requests. Please try again later.',
          details: { limit, window_seconds: BOLETO_RATE_LIMITS[row].windowSeconds, retry_after_seconds: retryAfter, reset_at: endMs / 1000 },
        },
        meta: { request_id: a.headers.get('x-request-id') },
      });
      expect(headersOf(a)).toEqual({ limit, remaining: 0, reset: endMs / 1000 });
      expect(a.headers.get('retry-after')).toBe(String(retryAfter));
    }

    it.each(ROWS)('%s: headers on every answer up to the limit, then 429; another key is unaffected', async (row) => {
      const limit = effectiveLimit(BOLETO_RATE_LIMITS[row].limit, appEnv);
      expect(limit).toBe(appEnv === 'production' ? BOLETO_RATE_LIMITS[row].limit : BOLETO_RATE_LIMITS[row].limit / 10);
      const c = await centralClient(s);
      const { send, status } = await requestFor(row, c, clock);
      const { endMs } = windowOf(row);

      let real = limit;
      if (limit > 100) {
        real = 2;
        const limiter = boletoRateLimiter(s.ctx);
        await inBatches(limit - real, 200, () => limiter.consume(`key:${c.keyId}`, bucketFor(row)));
      }
      const answers = await inBatches(real, 25, () => send());
      for (const a of answers) {
        expect(a.status, JSON.stringify(a.body)).toBe(status);
        expect(headersOf(a)).toMatchObject({ limit, reset: endMs / 1000 });
        expect(a.headers.get('retry-after')).toBeNull();
      }
      // Each request saw its own count: remaining took every value from real-1 down to 0 once.
      expect(answers.map((a) => headersOf(a).remaining).sort((x, y) => x - y)).toEqual(Array.from({ length: real }, (_, i) => i));

      expectRateLimited(await send(), row, limit);
      expectRateLimited(await send(), row, limit);

      const other = await centralClient(s);
      const fresh = await (await requestFor(row, other, clock)).send();
      expect(fresh.status).toBe(status);
      expect(headersOf(fresh)).toEqual({ limit, remaining: limit - 1, reset: endMs / 1000 });
    });

    it('4xx answers carry the headers and count against the limit', async () => {
      const c = await centralClient(s);
      const limit = effectiveLimit(100, appEnv);
      const bad = await c.call('POST', '/boletos', { boleto: { nosso_numero: 'x' } });
      expect(bad.status).toBe(400);
      expect(headersOf(bad)).toMatchObject({ limit, remaining: limit - 1 });
      const notFound = await c.call('GET', '/boletos/99999');
      expect(notFound.status).toBe(404);
      expect(headersOf(notFound)).toMatchObject({ limit: effectiveLimit(1000, appEnv), remaining: effectiveLimit(1000, appEnv) - 1 });
      const unsupported = await c.call('POST', '/boletos', 'a=1', { 'content-type': 'application/x-www-form-urlencoded' });
      expect(unsupported.status).toBe(415);
      expect(headersOf(unsupported)).toMatchObject({ limit, remaining: limit - 2 });
      const noRoute = await c.call('GET', '/no-such-endpoint');
      expect(noRoute.status).toBe(404);
      expect(headersOf(noRoute)).toMatchObject({ limit: effectiveLimit(1000, appEnv) });
    });

    it('requests without a valid key count per client address: 401 with headers, then 429', async () => {
      const limit = effectiveLimit(10, appEnv);
      const answers = await inBatches(limit, 10, (i) => centralRequest(s, 'POST', '/settlements/trigger', undefined, i % 2 ? { 'x-api-key': 'ck_guess' } : {}));
      for (const a of answers) expect([a.status, headersOf(a).limit]).toEqual([401, limit]);
      expect(answers.map((a) => headersOf(a).remaining).sort((x, y) => x - y)).toEqual(Array.from({ length: limit }, (_, i) => i));
      expectRateLimited(await centralRequest(s, 'POST', '/settlements/trigger', undefined, { 'x-api-key': 'ck_guess' }), 'POST /settlements/trigger', limit);
      // A valid key is counted on its own, not on the address.
      const c = await centralClient(s);
      expect((await c.call('POST', '/settlements/trigger')).status).toBe(200);
    });

    // Last: it moves the clock.
    it('the hour of the trigger outlasts minute windows; a new window starts with a full allowance', async () => {
      const c = await centralClient(s);
      const limit = effectiveLimit(10, appEnv);
      await inBatches(limit, 10, () => c.call('POST', '/settlements/trigger'));
      expect((await c.call('POST', '/settlements/trigger')).status).toBe(429);
      clock.advance(60_000);
      expect((await c.call('GET', '/health')).status).toBe(200);
      expect((await c.call('POST', '/settlements/trigger')).status).toBe(429);
      clock.ms = windowOf('POST /settlements/trigger').endMs;
      const next = await c.call('POST', '/settlements/trigger');
      expect(next.status).toBe(200);
      expect(headersOf(next)).toEqual({ limit, remaining: limit - 1, reset: clock.ms / 1000 + 3600 });
    });
  });
});

describe('boleto rate limits in APP_ENV=local', () => {
  let s: TestServer;
  const clock = new ManualClock(T0);
  beforeAll(async () => {
    s = await startTestServer({ clock, workers: false });
  });
  afterAll(async () => {
    await s?.close();
  });

  it('never refuses, and still reports production’s numbers in the headers', async () => {
    const c = await centralClient(s);
    const answers = await inBatches(12, 6, () => c.call('POST', '/settlements/trigger'));
    expect(answers.map((a) => a.status)).toEqual(Array(12).fill(200));
    expect(answers.map((a) => headersOf(a).limit)).toEqual(Array(12).fill(10));
    expect(Math.min(...answers.map((a) => headersOf(a).remaining))).toBe(0);
    expect(answers.every((a) => a.headers.get('retry-after') === null)).toBe(true);
  });
});
