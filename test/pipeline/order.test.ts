import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ApiClient, merchantWithKey, type MerchantFixture } from '../helpers/client.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { pipelineTestRoutes } from './testRoutes.js';

/**
 * One test per adjacent pair of stages (and a few wider jumps): a request that fails two stages
 * gets the error of the earlier one. The server's clock stands still, so the rate-limit window
 * exhausted in beforeAll stays exhausted.
 */
describe('pipeline order', () => {
  let s: TestServer;
  let m: MerchantFixture;
  let unlisted: MerchantFixture;
  let noPerms: MerchantFixture;
  const BAD_SIG = 'f'.repeat(128);

  beforeAll(async () => {
    const fixed = new Date();
    s = await startTestServer({ env: { RATE_LIMIT_PER_MINUTE: '1' }, clock: { now: () => fixed }, externalPlugins: [pipelineTestRoutes] });
    m = await merchantWithKey(s);
    unlisted = await merchantWithKey(s, { ipWhitelist: ['203.0.113.1'] });
    noPerms = await merchantWithKey(s, { permissions: [] });
    // Exhaust the window of 127.0.0.1 (limit 1).
    await m.client.get('/test/ping');
    expect((await m.client.get('/test/ping')).status).toBe(429);
  });
  afterAll(async () => s?.close());

  it('1 before 3: an unsupported Content-Type without credentials gets 415', async () => {
    const res = await fetch(`${s.url}/api/external/test/echo`, { method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded' }, body: 'a=1' });
    expect(res.status).toBe(415);
  });

  it('2 before 3: X-Key-Case applies to the credentials error', async () => {
    const res = await fetch(`${s.url}/api/external/test/ping`, { headers: { 'x-key-case': 'camelCase' } });
    expect(res.status).toBe(401);
  });

  it('3 before 4: bad credentials of a key whose whitelist excludes the caller get 401', async () => {
    const res = await new ApiClient(s.url, unlisted.client.clientId, 'sk_wrong').get('/test/ping');
    expect(res.status).toBe(401);
    expect(res.body.error.message).toBe('Invalid API key credentials');
  });

  it('4 before 5: a valid key from an unlisted IP with a bad signature gets 403', async () => {
    const res = await unlisted.client.post('/test/echo', { a: 1 }, { hmac: BAD_SIG });
    expect(res.status).toBe(403);
    expect(res.body).toEqual({ error: { status: 403, message: 'Request IP not in API key whitelist' } });
  });

  it('5 before 6: a bad signature from a rate-limited IP gets 401', async () => {
    const res = await m.client.post('/test/echo', { a: 1 }, { hmac: BAD_SIG });
    expect(res.status).toBe(401);
    expect(res.body).toEqual({ worked: false, detail: 'Invalid HMAC signature' });
  });

  it('3 before 6: bad credentials from a rate-limited IP get 401', async () => {
    const res = await new ApiClient(s.url, m.client.clientId, 'sk_wrong').get('/test/ping');
    expect(res.status).toBe(401);
  });

  it('6 before 7: a key lacking the permission from a rate-limited IP gets 429', async () => {
    const res = await noPerms.client.get('/test/ping');
    expect(res.status).toBe(429);
    expect(res.headers.get('retry-after')).toBe('60');
  });

  it('4 before 7: a key lacking the permission from an unlisted IP gets 403 (whitelist)', async () => {
    const k = await merchantWithKey(s, { permissions: [], ipWhitelist: ['203.0.113.1'] });
    const res = await k.client.get('/balance');
    expect(res.body.error.message).toBe('Request IP not in API key whitelist');
  });

  it('GET /balance runs 1, 2, 3, 4, 7 only: served from a rate-limited IP; permission still checked', async () => {
    expect((await m.client.get('/balance')).status).toBe(200);
    const res = await noPerms.client.get('/balance');
    expect(res.status).toBe(403);
    expect(res.body).toEqual({ error: 'forbidden', message: 'API key lacks permission: account:read' });
  });
});

describe('pipeline order, stages 7 and 8', () => {
  it('7 before 8, and 5 before 8: permission and signature errors win over a too-long Idempotency-Key', async () => {
    const s = await startTestServer({ externalPlugins: [pipelineTestRoutes] });
    try {
      const noPerms = await merchantWithKey(s, { permissions: ['account:read'] });
      const res = await noPerms.client.post('/test/execute', { a: 1 }, { idempotencyKey: 'k'.repeat(300) });
      expect(res.status).toBe(403);
      expect(res.body.error).toBe('forbidden');
      const m = await merchantWithKey(s);
      const bad = await m.client.post('/test/execute', { a: 1 }, { idempotencyKey: 'k'.repeat(300), hmac: 'f'.repeat(128) });
      expect(bad.status).toBe(401);
      const tooLong = await m.client.post('/test/execute', { a: 1 }, { idempotencyKey: 'k'.repeat(300) });
      expect(tooLong.status).toBe(400);
    } finally {
      await s.close();
    }
  });
});
