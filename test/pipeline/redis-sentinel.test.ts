import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { merchantWithKey, type MerchantFixture } from '../helpers/client.js';
import { BACKENDS } from '../helpers/db.js';
import { sentinelUnavailable, startSentinelLab, type SentinelLab } from '../helpers/sentinel.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { executions, pipelineTestRoutes } from './testRoutes.js';

/**
 * Redis through Sentinel (REDIS_SENTINELS, REDIS_MASTER_NAME; issue 25): pixgate finds the master
 * the sentinels name, follows a failover to the replica they promote, and a v2 nonce accepted
 * before the failover is refused for other content after it — also once the new master has lost
 * every key (FLUSHALL): the nonces are recorded in the database. Failovers: SENTINEL FAILOVER (a
 * planned switch), and a master killed with SIGKILL.
 *
 * Needs redis-server and redis-sentinel (Debian: redis-server, redis-sentinel; .ci/run installs
 * them). Everything runs on free ports in a temporary folder, never on the machine's Redis.
 */
const unavailable = sentinelUnavailable();
if (unavailable) console.warn(`redis-sentinel.test.ts skipped: ${unavailable}`);

const detail = (d: string) => ({ worked: false, detail: d });

describe.runIf(!unavailable)('Redis Sentinel', () => {
  let lab: SentinelLab;
  beforeAll(async () => {
    lab = await startSentinelLab();
  }, 60_000);
  afterAll(async () => lab?.stop());

  /** Retries a request while Redis is switching (503 from the nonce store), at most `ms`. */
  async function once<T extends { status: number }>(send: () => Promise<T>, ms = 20_000): Promise<T> {
    const deadline = Date.now() + ms;
    for (;;) {
      const res = await send();
      if (res.status !== 503 || Date.now() > deadline) return res;
      await new Promise((r) => setTimeout(r, 100));
    }
  }

  describe.each(BACKENDS)('on %s', (backend) => {
    let s: TestServer;
    let m: MerchantFixture;
    beforeAll(async () => {
      s = await startTestServer({
        backend,
        env: { REDIS_SENTINELS: lab.sentinels, REDIS_MASTER_NAME: lab.masterName, REDIS_COMMAND_TIMEOUT_MS: '500' },
        externalPlugins: [pipelineTestRoutes],
      });
      m = await merchantWithKey(s);
    }, 30_000);
    afterAll(async () => s?.close());

    it('follows a failover; a nonce accepted before it is refused for other content after it, and after the new master lost every key', async () => {
      expect(s.ctx.redis).toBeDefined();
      const text = '{"amount":250}';
      const nonce = `sentinel-${backend}-${Date.now()}`;
      const headers = m.client.signatureHeaders('POST', '/test/execute', text, { sign: 'v2', nonce, idempotencyKey: `sentinel-key-${backend}` });
      const accepted = await m.client.post('/test/execute', text, { sign: false, headers });
      expect(accepted.status).toBe(201);
      const before = await lab.master();
      expect(await before.get(`nonce:${m.client.clientId}:${nonce}`)).toBe(headers.hmac);
      const executed = await executions(s.ctx, m.client.clientId);

      const { from, to } = await lab.failover();
      expect(to).not.toBe(from);

      // pixgate works on the new master: a fresh v2 request is accepted and its nonce lands there.
      const freshNonce = `fresh-${backend}-${Date.now()}`;
      const fresh = await once(() => m.client.post('/test/execute', { amount: 1 }, { sign: 'v2', nonce: freshNonce }));
      expect(fresh.status).toBe(201);
      const after = await lab.master();
      expect(Number(after.options.port)).toBe(to);
      expect(await after.exists(`nonce:${m.client.clientId}:${freshNonce}`)).toBe(1);

      const reuse = () => m.client.post('/test/execute', { amount: 999 }, { sign: 'v2', nonce, idempotencyKey: `sentinel-other-${backend}` });
      const refused = await once(reuse);
      expect(refused.status).toBe(409);
      expect(refused.body).toEqual(detail('X-Request-Nonce was already used for a different request'));

      // The new master forgets everything (as a promoted replica that had not received the last
      // writes would forget those): the database still refuses the nonce.
      await after.flushall();
      const stillRefused = await once(reuse);
      expect(stillRefused.status).toBe(409);
      expect(stillRefused.body).toEqual(detail('X-Request-Nonce was already used for a different request'));
      const identical = await once(() => m.client.post('/test/execute', text, { sign: false, headers }));
      expect(identical.status).toBe(201);
      expect(identical.headers.get('x-idempotent-replay')).toBe('true');
      expect(await executions(s.ctx, m.client.clientId)).toBe(executed + 1); // the fresh request only
    }, 90_000);
  });

  it('the master killed (SIGKILL): pixgate finds the promoted replica, and the nonce accepted before is refused', async () => {
    const s = await startTestServer({
      backend: BACKENDS[0],
      env: { REDIS_SENTINELS: lab.sentinels, REDIS_MASTER_NAME: lab.masterName, REDIS_COMMAND_TIMEOUT_MS: '500' },
      externalPlugins: [pipelineTestRoutes],
    });
    try {
      const m = await merchantWithKey(s);
      const nonce = `killed-master-${Date.now()}`;
      expect((await once(() => m.client.post('/test/execute', { amount: 7 }, { sign: 'v2', nonce }))).status).toBe(201);
      const executed = await executions(s.ctx, m.client.clientId);
      const { to } = await lab.killMaster();
      const fresh = await once(() => m.client.post('/test/execute', { amount: 8 }, { sign: 'v2' }), 30_000);
      expect(fresh.status).toBe(201);
      expect(await lab.masterPort()).toBe(to);
      const reuse = await once(() => m.client.post('/test/execute', { amount: 9 }, { sign: 'v2', nonce }));
      expect(reuse.status).toBe(409);
      expect(reuse.body).toEqual(detail('X-Request-Nonce was already used for a different request'));
      expect(await executions(s.ctx, m.client.clientId)).toBe(executed + 1);
    } finally {
      await s.close();
    }
  }, 90_000);
});
