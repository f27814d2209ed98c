import { Redis } from 'ioredis';
import { describe, expect, it } from 'vitest';
import { signV1 } from '../../src/auth/hmac.js';
import { MemoryNonceStore, RedisNonceStore, type NonceStore } from '../../src/auth/nonceStore.js';
import { BACKENDS } from '../helpers/db.js';
import { merchantWithKey, type MerchantFixture } from '../helpers/client.js';
import { REDIS_VARIANTS, openTestRedis } from '../helpers/redis.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { executions, pipelineTestRoutes, withPipelineServer } from './testRoutes.js';

const detail = (d: string) => ({ worked: false, detail: d });

describe.each(BACKENDS)('pipeline stage 5, HMAC v1, on %s', (backend) => {
  let s: TestServer;
  let m: MerchantFixture;
  withPipelineServer({ backend }, (server, merchant) => {
    s = server;
    m = merchant;
  });

  it('accepts a v1 signature over the canonical body, in lower or upper case hex', async () => {
    const body = { b: 1, a: 'x' };
    expect((await m.client.post('/test/echo', body)).status).toBe(200);
    const upper = signV1(m.client.clientSecret, '{"a":"x","b":1}').toUpperCase();
    expect((await m.client.post('/test/echo', body, { hmac: upper })).status).toBe(200);
  });

  it('the canonical form ignores key order and whitespace of the body sent', async () => {
    const text = '{\n  "b" : [ 1, {"z": true, "y": null} ],\n  "a": "x, y: z"\n}';
    const res = await m.client.post('/test/echo', text, { hmac: signV1(m.client.clientSecret, '{"a":"x, y: z","b":[1,{"y":null,"z":true}]}') });
    expect(res.status).toBe(200);
    expect(res.body.received_body).toEqual({ a: 'x, y: z', b: [1, { y: null, z: true }] });
  });

  it('401 "Invalid HMAC signature" for a signature over unsorted keys, another secret, or garbage', async () => {
    for (const hmac of [
      signV1(m.client.clientSecret, '{"b":1,"a":"x"}'),
      signV1('sk_other', '{"a":"x","b":1}'),
      'abc',
      `${signV1(m.client.clientSecret, '{"a":"x","b":1}')}00`,
    ]) {
      const res = await m.client.post('/test/echo', { b: 1, a: 'x' }, { hmac });
      expect(res.status).toBe(401);
      expect(res.body).toEqual(detail('Invalid HMAC signature'));
    }
  });

  it('401 "Missing HMAC header"', async () => {
    const res = await m.client.post('/test/echo', { a: 1 }, { sign: false });
    expect(res.status).toBe(401);
    expect(res.body).toEqual(detail('Missing HMAC header'));
  });

  it('400 "Request body is required for HMAC validation" for an empty body', async () => {
    for (const body of ['', '   ']) {
      const res = await m.client.post('/test/echo', body, { hmac: 'a'.repeat(128) });
      expect(res.status).toBe(400);
      expect(res.body).toEqual(detail('Request body is required for HMAC validation'));
    }
    const none = await fetch(`${s.url}/api/external/test/echo`, { method: 'POST', headers: { authorization: m.client.authHeader(), hmac: 'a'.repeat(128) } });
    expect(none.status).toBe(400);
    expect(await none.json()).toEqual(detail('Request body is required for HMAC validation'));
  });

  it('400 "Request body must be valid JSON for HMAC validation" (also for multipart bodies)', async () => {
    for (const body of ['{"a":', "{'a':1}", '{"a":1} x', '{"a":01}']) {
      const res = await m.client.post('/test/echo', body, { hmac: 'a'.repeat(128) });
      expect(res.status).toBe(400);
      expect(res.body).toEqual(detail('Request body must be valid JSON for HMAC validation'));
    }
    const form = new FormData();
    form.set('a', '1');
    const res = await fetch(`${s.url}/api/external/test/echo`, { method: 'POST', headers: { authorization: m.client.authHeader(), hmac: 'a'.repeat(128) }, body: form });
    expect(res.status).toBe(400);
    expect(await res.json()).toEqual(detail('Request body must be valid JSON for HMAC validation'));
  });

  it('403 "HMAC secret not configured for this API key" for a key created with hmac: false', async () => {
    const k = await merchantWithKey(s, { hmac: false });
    const res = await k.client.post('/test/echo', { a: 1 });
    expect(res.status).toBe(403);
    expect(res.body).toEqual(detail('HMAC secret not configured for this API key'));
    expect((await k.client.get('/test/ping')).status).toBe(200); // GETs are not signed
  });
});

describe.each(BACKENDS)('pipeline stage 5, HMAC v2, on %s', (backend) => {
  let s: TestServer;
  let m: MerchantFixture;
  withPipelineServer({ backend }, (server, merchant) => {
    s = server;
    m = merchant;
  });

  it('accepts a v2 signature (timestamp, nonce, method, path, idempotency key, canonical body)', async () => {
    const res = await m.client.post('/test/echo', { a: 1 }, { sign: 'v2' });
    expect(res.status).toBe(200);
  });

  it('401 when the signed path, method or idempotency key differ from the request', async () => {
    const good = m.client.signatureHeaders('POST', '/test/echo', '{"a":1}', { sign: 'v2', idempotencyKey: 'key-12345' });
    for (const headers of [
      { ...m.client.signatureHeaders('POST', '/test/other', '{"a":1}', { sign: 'v2' }) },
      { ...good, 'idempotency-key': 'key-99999' },
      { ...good, 'x-request-nonce': 'n'.repeat(20) },
      { ...good, 'x-request-timestamp': String(Number(good['x-request-timestamp']) - 1) },
    ]) {
      const res = await m.client.post('/test/echo', '{"a":1}', { sign: false, headers });
      expect(res.status).toBe(401);
      expect(res.body).toEqual(detail('Invalid HMAC signature'));
    }
  });

  it('401 for a timestamp outside the 300-second tolerance, either side', async () => {
    // Margins of 10 s beyond the tolerance, so a stalled machine cannot flip the answer.
    const now = Math.floor(Date.now() / 1000);
    for (const timestamp of [now - 310, now + 310]) {
      const res = await m.client.post('/test/echo', { a: 1 }, { sign: 'v2', timestamp });
      expect(res.status).toBe(401);
      expect(res.body).toEqual(detail('Request timestamp is outside the 300-second tolerance'));
    }
    expect((await m.client.post('/test/echo', { a: 1 }, { sign: 'v2', timestamp: now - 280 })).status).toBe(200);
  });

  it('400 for a malformed version, timestamp, nonce or idempotency key', async () => {
    const cases: [Record<string, string>, string][] = [
      [{ 'x-signature-version': '3' }, 'X-Signature-Version must be 1 or 2'],
      [{ 'x-request-timestamp': 'yesterday' }, 'X-Request-Timestamp must be Unix time in seconds'],
      [{ 'x-request-timestamp': '__omit__' }, 'X-Request-Timestamp must be Unix time in seconds'],
      [{ 'x-request-nonce': 'short' }, 'X-Request-Nonce must be 16 to 128 characters from A-Z a-z 0-9 . _ ~ -'],
      [{ 'x-request-nonce': 'x'.repeat(129) }, 'X-Request-Nonce must be 16 to 128 characters from A-Z a-z 0-9 . _ ~ -'],
      [{ 'x-request-nonce': 'abcdefghijklmnop!' }, 'X-Request-Nonce must be 16 to 128 characters from A-Z a-z 0-9 . _ ~ -'],
      [{ 'idempotency-key': '__omit__' }, 'Idempotency-Key is required with signature version 2 (8 to 256 characters)'],
      [{ 'idempotency-key': 'short' }, 'Idempotency-Key is required with signature version 2 (8 to 256 characters)'],
      [{ 'idempotency-key': 'k'.repeat(257) }, 'Idempotency-Key is required with signature version 2 (8 to 256 characters)'],
    ];
    for (const [headers, message] of cases) {
      const res = await m.client.post('/test/echo', { a: 1 }, { sign: 'v2', headers });
      expect(res.status, JSON.stringify(headers)).toBe(400);
      expect(res.body).toEqual(detail(message));
    }
  });

  it('accepts nonces of 16 and 128 characters from the allowed alphabet', async () => {
    expect((await m.client.post('/test/echo', { a: 1 }, { sign: 'v2', nonce: 'Az09._~-Az09._~-' })).status).toBe(200);
    expect((await m.client.post('/test/echo', { a: 1 }, { sign: 'v2', nonce: 'n'.repeat(128) })).status).toBe(200);
  });

  it('409 for a nonce reused with different content; nothing is executed for it', async () => {
    const nonce = `nonce-${Date.now()}-abcdef`;
    const first = await m.client.post('/test/execute', { n: 1 }, { sign: 'v2', nonce, idempotencyKey: 'same-key-1' });
    expect(first.status).toBe(201);
    const before = await executions(s.ctx, m.client.clientId);
    for (const [body, key] of [[{ n: 2 }, 'same-key-1'], [{ n: 1 }, 'other-key-2']] as const) {
      const other = await m.client.post('/test/execute', body, { sign: 'v2', nonce, idempotencyKey: key });
      expect(other.status).toBe(409);
      expect(other.body).toEqual(detail('X-Request-Nonce was already used for a different request'));
    }
    expect(await executions(s.ctx, m.client.clientId)).toBe(before);
  });

  it('a byte-identical v2 repeat (same headers, same body) replays without executing again', async () => {
    const text = '{"amount":100}';
    const headers = m.client.signatureHeaders('POST', '/test/execute', text, { sign: 'v2', idempotencyKey: 'identical-key-1' });
    const before = await executions(s.ctx, m.client.clientId);
    const first = await m.client.post('/test/execute', text, { sign: false, headers });
    const second = await m.client.post('/test/execute', text, { sign: false, headers });
    expect(first.status).toBe(201);
    expect(second.status).toBe(201);
    expect(second.text).toBe(first.text);
    expect(second.headers.get('x-idempotent-replay')).toBe('true');
    expect(await executions(s.ctx, m.client.clientId)).toBe(before + 1);
  });
});

describe('pipeline stage 5, environments', () => {
  it('homologation accepts v2 only: 401 "HMAC signature version 2 is required" without the version header', async () => {
    const s = await startTestServer({ env: { APP_ENV: 'homologation' }, externalPlugins: [pipelineTestRoutes] });
    try {
      const m = await merchantWithKey(s);
      const res = await m.client.post('/test/echo', { a: 1 });
      expect(res.status).toBe(401);
      expect(res.body).toEqual(detail('HMAC signature version 2 is required'));
      expect((await m.client.post('/test/echo', { a: 1 }, { sign: 'v2' })).status).toBe(200);
    } finally {
      await s.close();
    }
  });

  it('production accepts v1 and v2', async () => {
    const s = await startTestServer({ env: { APP_ENV: 'production', DATABASE_URL: 'postgres://unused/db' }, externalPlugins: [pipelineTestRoutes] });
    try {
      const m = await merchantWithKey(s);
      expect((await m.client.post('/test/echo', { a: 1 })).status).toBe(200);
      expect((await m.client.post('/test/echo', { a: 1 }, { sign: 'v2' })).status).toBe(200);
    } finally {
      await s.close();
    }
  });
});

describe.each(REDIS_VARIANTS)('v2 nonce store (%s)', (variant) => {
  async function stores(): Promise<{ a: NonceStore; b: NonceStore; close(): Promise<void> }> {
    if (variant === 'memory') {
      const one = new MemoryNonceStore(clock);
      return { a: one, b: one, close: async () => {} };
    }
    // Two connections: two processes sharing one Redis.
    const r1 = await openTestRedis();
    const r2 = new Redis(process.env.TEST_REDIS_URL!, { keyPrefix: r1.redis.options.keyPrefix! });
    return { a: new RedisNonceStore(r1.redis), b: new RedisNonceStore(r2), close: async () => { r2.disconnect(); await r1.close(); } };
  }
  let now = Date.parse('2026-11-21T10:00:00Z');
  const clock = { now: () => new Date(now) };

  it('claims a nonce once: a repeat with the same fingerprint is "repeat", another fingerprint "conflict"', async () => {
    const { a, b, close } = await stores();
    try {
      expect(await a.claim('cli_1', 'nonce-aaaaaaaaaaaa', 'sig-1', 600, clock.now())).toBe('claimed');
      expect(await b.claim('cli_1', 'nonce-aaaaaaaaaaaa', 'sig-1', 600, clock.now())).toBe('repeat');
      expect(await b.claim('cli_1', 'nonce-aaaaaaaaaaaa', 'sig-2', 600, clock.now())).toBe('conflict');
      expect(await b.claim('cli_2', 'nonce-aaaaaaaaaaaa', 'sig-2', 600, clock.now())).toBe('claimed'); // scoped per key
    } finally {
      await close();
    }
  });

  it('concurrent claims of one nonce: exactly one wins', async () => {
    const { a, b, close } = await stores();
    try {
      const results = await Promise.all(Array.from({ length: 20 }, (_, i) => (i % 2 ? a : b).claim('cli_1', 'race-nonce-xxxxxxxx', `sig-${i}`, 600, clock.now())));
      expect(results.filter((r) => r === 'claimed')).toHaveLength(1);
      expect(results.filter((r) => r === 'conflict')).toHaveLength(19);
    } finally {
      await close();
    }
  });

  it.runIf(variant === 'memory')('forgets a nonce after its time to live', async () => {
    const store = new MemoryNonceStore(clock);
    expect(await store.claim('cli_1', 'ttl-nonce-xxxxxxxx', 'sig', 600, clock.now())).toBe('claimed');
    now += 601_000;
    expect(await store.claim('cli_1', 'ttl-nonce-xxxxxxxx', 'other', 600, clock.now())).toBe('claimed');
  });
});

describe('v2 nonce store unavailable', () => {
  it('503 and the operation is not executed', async () => {
    const dead = new Redis('redis://127.0.0.1:1', { lazyConnect: true, maxRetriesPerRequest: 0, enableOfflineQueue: false, retryStrategy: () => null });
    dead.on('error', () => {});
    const s = await startTestServer({ externalPlugins: [pipelineTestRoutes], redis: dead });
    try {
      const m = await merchantWithKey(s);
      const res = await m.client.post('/test/execute', { a: 1 }, { sign: 'v2' });
      expect(res.status).toBe(503);
      expect(res.body).toEqual(detail('Replay protection is unavailable; the request was not executed'));
      expect(await executions(s.ctx, m.client.clientId)).toBe(0);
    } finally {
      await s.close();
      dead.disconnect();
    }
  });
});
