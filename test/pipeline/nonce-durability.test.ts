import { Redis } from 'ioredis';
import { describe, expect, it } from 'vitest';
import { ApiClient, merchantWithKey } from '../helpers/client.js';
import { BACKENDS, openTestDatabase } from '../helpers/db.js';
import { openTestRedis } from '../helpers/redis.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { executions, pipelineTestRoutes } from './testRoutes.js';
import { DurableNonces } from '../../src/auth/nonceStore.js';
import { NONCE_DAY_GRACE_MS, runRetention } from '../../src/retention/retention.js';
import { dayStart, partitionName } from '../../src/db/partitions.js';

/**
 * Signature-v2 nonces outlive the store that answers them first (issue 25): a nonce accepted
 * before Redis lost its keys (flushed, or replaced by an empty Redis), or before a restart of a
 * process that kept them in memory, is still refused for other content (409), and a byte-identical
 * repeat of the accepted request still replays its answer without executing again.
 */
const detail = (d: string) => ({ worked: false, detail: d });
const REUSED = detail('X-Request-Nonce was already used for a different request');

/** Deletes every key of a test Redis connection's prefix: to pixgate, Redis lost everything. */
async function flushPrefix(redis: Redis): Promise<number> {
  const prefix = redis.options.keyPrefix!;
  const raw = new Redis(process.env.TEST_REDIS_URL!, { lazyConnect: true });
  await raw.connect();
  let deleted = 0;
  let cursor = '0';
  do {
    const [next, keys] = await raw.scan(cursor, 'MATCH', `${prefix}*`, 'COUNT', 500);
    cursor = next;
    if (keys.length) deleted += await raw.del(...keys);
  } while (cursor !== '0');
  await raw.quit();
  return deleted;
}

/** The accepted request (its exact bytes and headers), and what to send to try its nonce again. */
async function acceptOne(s: TestServer, client: ApiClient) {
  const text = '{"amount":100}';
  const nonce = `durable-${Date.now()}-nonce`;
  const headers = client.signatureHeaders('POST', '/test/execute', text, { sign: 'v2', nonce, idempotencyKey: 'durable-key-1' });
  const first = await client.post('/test/execute', text, { sign: false, headers });
  expect(first.status).toBe(201);
  return { text, nonce, headers, first, executed: await executions(s.ctx, client.clientId) };
}

/** After the fast store forgot: other content under the nonce is 409, the identical request replays. */
async function expectRemembered(s: TestServer, client: ApiClient, accepted: Awaited<ReturnType<typeof acceptOne>>) {
  for (const [body, key] of [[{ amount: 999 }, 'durable-key-1'], [{ amount: 100 }, 'durable-key-2']] as const) {
    const other = await client.post('/test/execute', body, { sign: 'v2', nonce: accepted.nonce, idempotencyKey: key });
    expect(other.status).toBe(409);
    expect(other.body).toEqual(REUSED);
  }
  const again = await client.post('/test/execute', accepted.text, { sign: false, headers: accepted.headers });
  expect(again.status).toBe(201);
  expect(again.text).toBe(accepted.first.text);
  expect(again.headers.get('x-idempotent-replay')).toBe('true');
  expect(await executions(s.ctx, client.clientId)).toBe(accepted.executed);
}

describe.each(BACKENDS)('v2 nonces are durable in the database, on %s', (backend) => {
  it.runIf(process.env.TEST_REDIS_URL)('Redis flushed, then replaced by an empty Redis: the nonce is still refused for other content', async () => {
    const first = await openTestRedis();
    const s = await startTestServer({ backend, redis: first.redis, externalPlugins: [pipelineTestRoutes] });
    let second: Awaited<ReturnType<typeof openTestRedis>> | undefined;
    let restarted: TestServer | undefined;
    try {
      const m = await merchantWithKey(s);
      const accepted = await acceptOne(s, m.client);
      expect(await flushPrefix(first.redis)).toBeGreaterThan(0);
      await expectRemembered(s, m.client, accepted);

      // Another Redis altogether (its own empty key space), and a restarted process on the same database.
      await s.stop();
      second = await openTestRedis();
      restarted = await startTestServer({ database: s.database, redis: second.redis, externalPlugins: [pipelineTestRoutes] });
      await expectRemembered(restarted, new ApiClient(restarted.url, m.client.clientId, m.client.clientSecret), accepted);
    } finally {
      await restarted?.close();
      await s.database.close();
      await second?.close();
      await first.close();
    }
  });

  it('process memory (no Redis): a restart forgets no nonce', async () => {
    const s = await startTestServer({ backend, externalPlugins: [pipelineTestRoutes] });
    let restarted: TestServer | undefined;
    try {
      const m = await merchantWithKey(s);
      const accepted = await acceptOne(s, m.client);
      await s.stop();
      restarted = await startTestServer({ database: s.database, externalPlugins: [pipelineTestRoutes] });
      await expectRemembered(restarted, new ApiClient(restarted.url, m.client.clientId, m.client.clientSecret), accepted);
    } finally {
      await restarted?.close();
      await s.database.close();
    }
  });

  it('the record lives as long as the nonce can be presented, in the partition of its signed day; the retention worker drops that day once it cannot be signed any more', async () => {
    const s = await startTestServer({ backend, externalPlugins: [pipelineTestRoutes], workers: false });
    try {
      const m = await merchantWithKey(s);
      await acceptOne(s, m.client);
      const rows = await s.ctx.db.query<{ client_id: string; expires_at: Date }>('SELECT client_id, expires_at FROM request_nonces');
      expect(rows.map((r) => r.client_id)).toEqual([m.client.clientId]);
      const lifetimeS = (new Date(rows[0]!.expires_at).getTime() - Date.now()) / 1000;
      expect(lifetimeS).toBeGreaterThan(500);
      expect(lifetimeS).toBeLessThanOrEqual(600);
      const [{ t }] = (await s.ctx.db.query<{ t: string }>('SELECT tableoid::regclass::text AS t FROM request_nonces')) as [{ t: string }];
      const signedDay = dayStart(new Date(Date.now() - 1000)); // (the signed timestamp, whole seconds)
      expect([partitionName('request_nonces', signedDay), partitionName('request_nonces', dayStart(new Date()))]).toContain(t);
      expect((await runRetention({ db: s.ctx.db, clock: { now: () => new Date() }, config: s.ctx.config })).nonce_days_dropped).toEqual([]);
      // Past the end of its day and the grace (a request signed that day is refused by the timestamp check from then on).
      const later = { now: () => new Date(dayStart(new Date()).getTime() + 86_400_000 + NONCE_DAY_GRACE_MS) };
      expect((await runRetention({ db: s.ctx.db, clock: later, config: s.ctx.config })).nonce_days_dropped).toContain(t.slice(-8).replace(/(\d{4})(\d{2})(\d{2})/, '$1-$2-$3'));
      expect(await s.ctx.db.query('SELECT 1 FROM request_nonces')).toEqual([]);
    } finally {
      await s.close();
    }
  });

  it('a nonce signed just before midnight is refused for other content when replayed just after it, by a restarted process (its record sits in the signed day)', async () => {
    // Today's last seconds on the server's clock, then the next day's first: the record is in
    // today's partition (its signed timestamp's), the replay arrives on the next day, and the
    // (client, nonce, signed day) key still meets it — the day is the signed timestamp's, not the clock's.
    const midnight = dayStart(new Date()).getTime() + 86_400_000;
    let now = midnight - 5_000;
    const clock = { now: () => new Date(now) };
    const s = await startTestServer({ backend, clock, externalPlugins: [pipelineTestRoutes], workers: false });
    let restarted: TestServer | undefined;
    try {
      const m = await merchantWithKey(s);
      const timestamp = Math.floor((midnight - 10_000) / 1000);
      const nonce = `midnight-${Date.now()}-nonce`;
      const text = '{"amount":100}';
      const headers = m.client.signatureHeaders('POST', '/test/execute', text, { sign: 'v2', nonce, idempotencyKey: 'midnight-key-1', timestamp });
      const first = await m.client.post('/test/execute', text, { sign: false, headers });
      expect(first.status).toBe(201);
      const [row] = await s.ctx.db.query<{ t: string }>('SELECT tableoid::regclass::text AS t FROM request_nonces WHERE nonce = $1', [nonce]);
      expect(row!.t).toBe(partitionName('request_nonces', new Date(midnight - 86_400_000)));
      const executed = await executions(s.ctx, m.client.clientId);

      await s.stop(); // process memory forgotten
      now = midnight + 5_000;
      // A retention pass after midnight keeps the signed day: a request signed on it can still pass the timestamp check.
      expect((await runRetention({ db: s.ctx.db, clock, config: s.ctx.config })).nonce_days_dropped).toEqual([]);
      restarted = await startTestServer({ database: s.database, clock, externalPlugins: [pipelineTestRoutes], workers: false });
      const client = new ApiClient(restarted.url, m.client.clientId, m.client.clientSecret);
      const other = await client.post('/test/execute', { amount: 999 }, { sign: 'v2', nonce, idempotencyKey: 'midnight-key-2', timestamp });
      expect(other.status).toBe(409);
      expect(other.body).toEqual(REUSED);
      const again = await client.post('/test/execute', text, { sign: false, headers });
      expect(again.status).toBe(201);
      expect(again.headers.get('x-idempotent-replay')).toBe('true');
      expect(await executions(restarted.ctx, m.client.clientId)).toBe(executed);
    } finally {
      await restarted?.close();
      await s.database.close();
    }
  });

  it('the durable store alone: claimed once, repeat, conflict naming the first fingerprint; one winner in a batch; an expired record is taken over', async () => {
    const database = await openTestDatabase(backend);
    try {
      let now = Date.now();
      const d = new DurableNonces(database.db, { now: () => new Date(now) });
      const nonce = 'durable-nonce-0001';
      expect(await d.claim('cli_1', nonce, 'sig-1', 600, new Date(now))).toEqual({ claim: 'claimed', fingerprint: 'sig-1' });
      expect(await d.claim('cli_1', nonce, 'sig-1', 600, new Date(now))).toEqual({ claim: 'repeat', fingerprint: 'sig-1' });
      expect(await d.claim('cli_1', nonce, 'sig-2', 600, new Date(now))).toEqual({ claim: 'conflict', fingerprint: 'sig-1' });
      expect((await d.claim('cli_2', nonce, 'sig-2', 600, new Date(now))).claim).toBe('claimed'); // scoped per key
      // One event-loop turn: one batch, the same nonce many times, and fresh ones with it.
      const race = await Promise.all(Array.from({ length: 20 }, (_, i) => d.claim('cli_1', i % 2 ? 'race-nonce-000001' : `fresh-nonce-${String(i).padStart(5, '0')}`, `sig-${i}`, 600, new Date(now))));
      const raced = race.filter((_, i) => i % 2);
      expect(raced.filter((r) => r.claim === 'claimed')).toHaveLength(1);
      expect(raced.filter((r) => r.claim === 'conflict')).toHaveLength(9);
      expect(race.filter((_, i) => i % 2 === 0).every((r) => r.claim === 'claimed')).toBe(true);
      now += 601_000;
      expect((await d.claim('cli_1', nonce, 'sig-3', 600, new Date(now))).claim).toBe('claimed');
    } finally {
      await database.close();
    }
  });
});
