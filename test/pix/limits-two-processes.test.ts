import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { addPixKey, ApiClient, merchantWithKey, type MerchantFixture } from '../helpers/client.js';
import type { TestDatabase } from '../helpers/db.js';
import { openTestDatabase, schemaAccess } from '../helpers/db.js';
import { expectLedgerConsistent, foreignKey, SIM_FAST, waitFor } from '../helpers/pix.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

/**
 * Issue 24, item 1: the daily and nighttime cash-out limits hold across two processes (two app
 * instances, each with its own pool, on one PostgreSQL schema). The race: both processes' reserve
 * statements take their snapshots, then wait for the account's books lock; the first to get it
 * inserts the window's usage row (the first cash-out of the window) and commits; the second, as of
 * its older snapshot, did not see that row and read `sent` as 0. The test lines the two up
 * deterministically: a third connection holds the books lock until both statements wait behind it.
 */
const url = process.env.TEST_DATABASE_URL;

describe.skipIf(!url)('cash-out limits across two processes on postgres', () => {
  let shared: TestDatabase;
  let bDatabase: TestDatabase;
  let a: TestServer;
  let b: TestServer;
  let schema: string;
  let receiver: string;

  beforeAll(async () => {
    shared = await openTestDatabase('postgres');
    [{ s: schema }] = (await shared.db.query<{ s: string }>('SELECT current_schema() AS s')) as [{ s: string }];
    const db = await schemaAccess(schema).open({ max: 5, applicationName: 'pixgate-b' });
    bDatabase = { db, backend: 'postgres', close: () => db.close(), reopen: () => Promise.reject(new Error('not here')) };
    a = await startTestServer({ database: shared, env: SIM_FAST });
    b = await startTestServer({ database: bDatabase, env: SIM_FAST, workers: false });
    receiver = await foreignKey(a);
  });
  afterAll(async () => {
    await b?.close();
    await a?.close();
    await bDatabase?.close();
    await expectLedgerConsistent(shared.db);
    await shared?.close();
  });

  /** A third connection that holds `accountId`'s books locked until `release`. */
  async function holdBooks(accountId: number) {
    const c = new pg.Client({ connectionString: url });
    await c.connect();
    await c.query(`SET search_path TO ${schema}`);
    await c.query('BEGIN');
    await c.query('SELECT id FROM ledger_accounts WHERE account_id = $1 ORDER BY id FOR UPDATE', [accountId]);
    const [{ pid }] = (await c.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows as [{ pid: number }];
    return {
      /**
       * How many sessions wait for this one's locks, directly or behind another waiter (the second
       * waiter of a row waits for the first one's tuple lock).
       */
      waiters: async () => {
        const r = await shared.db.query<{ n: number }>(
          `WITH RECURSIVE w(pid) AS (
             SELECT a.pid FROM pg_stat_activity a WHERE $1::int = ANY (pg_blocking_pids(a.pid))
             UNION
             SELECT a.pid FROM pg_stat_activity a JOIN w ON w.pid = ANY (pg_blocking_pids(a.pid)))
           SELECT count(*)::int AS n FROM w`,
          [pid],
        );
        return r[0]!.n;
      },
      release: async () => {
        await c.query('ROLLBACK');
        await c.end();
      },
    };
  }

  async function limitedMerchant(limitCents: number): Promise<MerchantFixture> {
    const m = await merchantWithKey(a, { depositCents: 10 * limitCents });
    const patched = await a.admin('PATCH', `/accounts/${m.accountId}`, {
      cash_out_daily_limit_cents: limitCents,
      cash_out_nighttime_limit_cents: limitCents,
      cash_out_max_amount_cents: limitCents,
    });
    expect(patched.status).toBe(200);
    return m;
  }

  const usage = async (accountId: number) =>
    shared.db.query<{ window_kind: string; amount: number }>('SELECT window_kind, amount FROM cash_out_usage WHERE account_id = $1 ORDER BY window_kind', [accountId]);

  /** Both processes' cash-outs of `amountCents` lined up behind one lock, then let go together. */
  async function raceOnce(m: MerchantFixture, amountCents: number, warm: boolean) {
    const onB = new ApiClient(b.url, m.client.clientId, m.client.clientSecret);
    if (warm) {
      // Each process has read the account once (the path without a read: reserveAssumed).
      for (const client of [m.client, onB]) expect((await client.post('/pix/cash-out', { amount: 1, pix_key: receiver })).status).toBe(200);
      // ... and a new window starts: no usage row yet.
      await shared.db.query('DELETE FROM cash_out_usage WHERE account_id = $1', [m.accountId]);
    }
    const hold = await holdBooks(m.accountId);
    let results: { status: number; body: any }[];
    try {
      const pending = [m.client, onB].map((client) => client.post('/pix/cash-out', { amount: amountCents, pix_key: receiver }));
      await waitFor(hold.waiters, (n) => n >= 2, 20_000);
      await hold.release();
      results = await Promise.all(pending);
    } catch (err) {
      await hold.release().catch(() => {});
      throw err;
    }
    return results;
  }

  it.each([
    ['first read of the account in each process', false, true],
    ['accounts both processes already know (no read)', true, true],
    // The mechanism alone: the reserve that waited for the books decides again under the locks.
    ['first read, the database backstop disabled', false, false],
    ['no read, the database backstop disabled', true, false],
  ])('two R$ 800 cash-outs against limits of R$ 1,000 from two processes at the start of a window: one accepted, one refused (%s)', async (_name, warm, backstop) => {
    const limit = 100_000; // R$ 1,000.00
    const m = await limitedMerchant(limit);
    if (!backstop) await shared.db.exec('ALTER TABLE cash_out_usage DISABLE TRIGGER cash_out_usage_within_limit');
    let results: { status: number; body: any }[];
    try {
      results = await raceOnce(m, 80_000, warm);
    } finally {
      if (!backstop) await shared.db.exec('ALTER TABLE cash_out_usage ENABLE TRIGGER cash_out_usage_within_limit');
    }
    const statuses = results.map((r) => r.status).sort();
    expect(statuses, JSON.stringify(results.map((r) => r.body))).toEqual([200, 422]);
    const refused = results.find((r) => r.status === 422)!;
    expect(['daily_limit_exceeded', 'nighttime_limit_exceeded']).toContain(refused.body.code);
    for (const row of await usage(m.accountId)) expect(row.amount).toBeLessThanOrEqual(limit * 100);
  });

  it('the database refuses a usage above the account limit, whatever the writer (assertion after the write)', async () => {
    const limit = 100_000;
    const m = await limitedMerchant(limit);
    const err = await shared.db
      .query(`INSERT INTO cash_out_usage (account_id, window_kind, window_start, amount) VALUES ($1, 'day', now(), $2)`, [m.accountId, limit * 100 + 1])
      .then(() => null, (e: unknown) => e as { code?: string; constraint?: string });
    expect(err?.code).toBe('23514');
    expect(err?.constraint).toBe('cash_out_usage_within_limit');
    // At the limit exactly: accepted; and a lowered limit never blocks giving usage back.
    await shared.db.query(`INSERT INTO cash_out_usage (account_id, window_kind, window_start, amount) VALUES ($1, 'day', '2020-01-01', $2)`, [m.accountId, limit * 100]);
    expect((await a.admin('PATCH', `/accounts/${m.accountId}`, { cash_out_daily_limit_cents: 1 })).status).toBe(200);
    await shared.db.query(`UPDATE cash_out_usage SET amount = amount - 100 WHERE account_id = $1 AND window_start = '2020-01-01'`, [m.accountId]);
  });

  it('TEF and cash-outs share the windows: a TEF and a cash-out lined up from two processes never pass the limit together', async () => {
    const limit = 100_000;
    const m = await limitedMerchant(limit);
    const other = await merchantWithKey(a);
    const otherKey = await addPixKey(a, other.accountId, 'evp');
    const onB = new ApiClient(b.url, m.client.clientId, m.client.clientSecret);
    const hold = await holdBooks(m.accountId);
    let results: { status: number; body: any }[];
    try {
      const pending = [
        m.client.post('/tef/transfers', { amount: 80_000, pix_key: otherKey }),
        onB.post('/pix/cash-out', { amount: 80_000, pix_key: receiver }),
      ];
      await waitFor(hold.waiters, (n) => n >= 2, 20_000);
      await hold.release();
      results = await Promise.all(pending);
    } catch (err) {
      await hold.release().catch(() => {});
      throw err;
    }
    const accepted = results.filter((r) => r.status === 200 || r.status === 201);
    expect(accepted, JSON.stringify(results.map((r) => [r.status, r.body]))).toHaveLength(1);
    for (const row of await usage(m.accountId)) expect(row.amount).toBeLessThanOrEqual(limit * 100);
  });
});
