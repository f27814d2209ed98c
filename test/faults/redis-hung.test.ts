import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { createServer } from 'node:net';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { merchantWithKey, type MerchantFixture } from '../helpers/client.js';
import { startTestServer, TEST_ADMIN_TOKEN, type TestServer } from '../helpers/server.js';
import { pipelineTestRoutes } from '../pipeline/testRoutes.js';

/**
 * Issue 24, item 17: a hung Redis (frozen with SIGSTOP: the TCP connection stays up and nothing
 * answers) must behave like a stopped one — signature-v2 requests answered 503 (replay protection
 * unavailable, fail closed), the rate limiter failing open — instead of stalling every signed
 * request; and /readyz stays 200 (degraded) since requests still work. Our own redis-server on a
 * free port; the machine's Redis is never touched.
 */
const hasRedis = spawnSync('sh', ['-c', 'command -v redis-server']).status === 0;

async function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const s = createServer();
    s.listen(0, '127.0.0.1', () => {
      const port = (s.address() as { port: number }).port;
      s.close(() => resolve(port));
    });
  });
}

/** A request that has not answered after this is stalled (the test's own bound, not a timing claim). */
const STALLED = 20_000;

describe.skipIf(!hasRedis)('a hung Redis (SIGSTOP)', () => {
  let redisProc: ChildProcess;
  let server: TestServer;
  let degradedServer: TestServer;
  let merchant: MerchantFixture;
  let url: string;

  beforeAll(async () => {
    const port = await freePort();
    redisProc = spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'], { stdio: 'ignore' });
    url = `redis://127.0.0.1:${port}`;
    for (let i = 0; ; i++) {
      const probe = new Redis(url, { lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null });
      probe.on('error', () => {});
      try {
        await probe.connect();
        probe.disconnect();
        break;
      } catch {
        probe.disconnect();
        if (i > 100) throw new Error('redis-server did not start');
        await new Promise((r) => setTimeout(r, 50));
      }
    }
    server = await startTestServer({ env: { REDIS_URL: url }, externalPlugins: [pipelineTestRoutes] });
    degradedServer = await startTestServer({ env: { REDIS_URL: url, READYZ_REDIS: 'degraded' } });
    merchant = await merchantWithKey(server);
    expect((await merchant.client.post('/test/echo', { a: 1 }, { sign: 'v2' })).status).toBe(200);
  });

  afterAll(async () => {
    if (redisProc?.pid) {
      process.kill(redisProc.pid, 'SIGCONT');
      redisProc.kill('SIGKILL');
    }
    await server?.close();
    await degradedServer?.close();
  });

  it('answers like a stopped Redis: v2 503 (not executed), v1 passes the limiter; /readyz 503 (contract), 200 degraded with READYZ_REDIS=degraded', async () => {
    process.kill(redisProc.pid!, 'SIGSTOP');
    try {
      const signal = () => AbortSignal.timeout(STALLED);
      // Several rounds: the first finds the connection up and waits for the command timeout, the
      // next ones must not wait again for each request.
      for (let round = 0; round < 3; round++) {
        const [v2, v1, get] = await Promise.all([
          merchant.client.post('/test/echo', { round }, { sign: 'v2' }),
          merchant.client.post('/test/echo', { round }, { sign: 'v1' }),
          merchant.client.get('/test/ping'),
        ]);
        expect(v2.status).toBe(503);
        expect(v2.body).toEqual({ worked: false, detail: 'Replay protection is unavailable; the request was not executed' });
        expect(v2.headers.get('retry-after')).toBe('5');
        expect(v1.status).toBe(200);
        expect(get.status).toBe(200);
      }
      const ready = await fetch(`${server.url}/readyz`, { signal: signal() });
      expect(ready.status).toBe(503);
      expect(await ready.json()).toEqual({ status: 'not ready', checks: { database: 'ok', redis: 'unavailable' } });
      const degraded = await fetch(`${degradedServer.url}/readyz`, { signal: signal() });
      expect(degraded.status).toBe(200);
      expect(await degraded.json()).toEqual({ status: 'degraded', checks: { database: 'ok', redis: 'unavailable' } });
      const metrics = await (await fetch(`${server.url}/metrics`, { headers: { authorization: `Bearer ${TEST_ADMIN_TOKEN}` }, signal: signal() })).text();
      expect(metrics).toMatch(/^pixgate_redis_up 0$/m);
    } finally {
      process.kill(redisProc.pid!, 'SIGCONT');
    }
    // Back: v2 requests pass again once the client has reconnected.
    for (let i = 0; ; i++) {
      const res = await merchant.client.post('/test/echo', { back: i }, { sign: 'v2' });
      if (res.status === 200) break;
      if (i > 100) throw new Error(`v2 still ${res.status} after Redis came back`);
      await new Promise((r) => setTimeout(r, 100));
    }
    const ready = await fetch(`${server.url}/readyz`);
    expect(await ready.json()).toEqual({ status: 'ready', checks: { database: 'ok', redis: 'ok' } });
    const metrics = await (await fetch(`${server.url}/metrics`, { headers: { authorization: `Bearer ${TEST_ADMIN_TOKEN}` } })).text();
    expect(metrics).toMatch(/^pixgate_redis_up 1$/m);
  });
});
