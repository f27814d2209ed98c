import { spawnSync } from 'node:child_process';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PostgresCluster, postgresBin, sleep } from '../../bench/chaos/infra.js';
import { CommitOutcomeUnknown, type Database } from '../../src/db/db.js';
import { migrate } from '../../src/db/migrate.js';
import { openPostgres } from '../../src/db/postgres.js';
import { addPixKey, merchantWithKey, type MerchantFixture } from '../helpers/client.js';
import { balances, expectLedgerConsistent, SIM_FAST } from '../helpers/pix.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

/** initdb refuses root: as root the cluster runs as the postgres user, which must exist. */
const canRun = postgresBin() !== undefined && (process.getuid?.() !== 0 || spawnSync('id', ['postgres']).status === 0);

/**
 * Issue 25, item 2: a COMMIT whose outcome pixgate cannot know is never answered 2xx. A
 * PostgreSQL cluster of the test's own waits at every COMMIT of a marked transaction for a
 * synchronous standby that does not exist (`synchronous_standby_names`, the transaction's
 * `synchronous_commit` turned on by a trigger); another session then cancels or terminates the
 * waiting backend, as a failover manager, an operator or statement_timeout would. PostgreSQL
 * then has committed locally and says so only in a WARNING ("might not have been replicated"), or
 * closes the connection. The client must get 503 with Retry-After, and the retry under the same
 * Idempotency-Key must answer the committed outcome without running the transfer twice.
 */
describe.runIf(canRun)('COMMIT with an unknown outcome (own PostgreSQL cluster, a synchronous standby that never answers)', () => {
  let cluster: PostgresCluster;
  let db: Database;
  let s: TestServer;
  let admin: pg.Client;
  let a: MerchantFixture;
  let bKey: string;

  /** Cancels (or terminates) every backend waiting for the synchronous standby, until `stop`. */
  function interruptSyncWaits(how: 'cancel' | 'terminate') {
    let running = true;
    let interrupted = 0;
    const loop = (async () => {
      while (running) {
        const { rows } = await admin.query<{ pid: number }>(`SELECT pid FROM pg_stat_activity WHERE wait_event = 'SyncRep'`);
        for (const { pid } of rows) {
          await admin.query(how === 'cancel' ? 'SELECT pg_cancel_backend($1)' : 'SELECT pg_terminate_backend($1)', [pid]);
          interrupted++;
        }
        await sleep(20);
      }
    })();
    return {
      async stop() {
        running = false;
        await loop;
        return interrupted;
      },
    };
  }

  beforeAll(async () => {
    cluster = new PostgresCluster('-c synchronous_standby_names=no_such_standby -c synchronous_commit=local');
    await cluster.init();
    admin = new pg.Client({ connectionString: cluster.url });
    await admin.connect();
    db = await openPostgres({ url: cluster.url, max: 10, statementTimeoutMs: 30_000 });
    await migrate(db);
    // A TEF's transaction waits for the (missing) synchronous standby at COMMIT; nothing else does.
    await admin.query(`CREATE FUNCTION wait_for_standby() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        IF NEW.kind = 'tef_out' THEN PERFORM set_config('synchronous_commit', 'on', true); END IF;
        RETURN NEW;
      END $$`);
    s = await startTestServer({ database: { db, backend: 'postgres', close: async () => {}, reopen: () => Promise.reject(new Error('not here')) }, env: SIM_FAST, workers: false });
    a = await merchantWithKey(s, { depositCents: 100_000, name: 'Loja A' });
    const b = await merchantWithKey(s, { name: 'Loja B' });
    bKey = await addPixKey(s, b.accountId, 'evp');
  }, 120_000);
  afterAll(async () => {
    await s?.close();
    await db?.close();
    await admin?.end().catch(() => {});
    await cluster?.destroy();
  });

  const tefOuts = async () => (await db.query<{ n: number }>(`SELECT count(*)::int AS n FROM transactions WHERE kind = 'tef_out' AND account_id = $1`, [a.accountId]))[0]!.n;

  for (const how of ['cancel', 'terminate'] as const) {
    it(`${how} of the backend waiting at COMMIT: 503 with Retry-After, and the retry under the same Idempotency-Key answers the committed transfer once`, async () => {
      const before = await balances(db, a.accountId);
      const outsBefore = await tefOuts();
      await admin.query(`CREATE TRIGGER wait_for_standby AFTER INSERT ON transactions FOR EACH ROW EXECUTE FUNCTION wait_for_standby()`);
      const interrupter = interruptSyncWaits(how);
      const key = `sync-${how}`;
      let first;
      try {
        first = await a.client.post('/tef/transfers', { amount: 1000, pix_key: bKey }, { idempotencyKey: key });
      } finally {
        expect(await interrupter.stop()).toBeGreaterThan(0);
        await admin.query(`DROP TRIGGER wait_for_standby ON transactions`);
      }
      expect(first.status).toBe(503);
      expect(Number(first.headers.get('retry-after'))).toBeGreaterThan(0);
      // Committed on this server all the same (the standby never confirmed it).
      expect(await tefOuts()).toBe(outsBefore + 1);

      const retry = await a.client.post('/tef/transfers', { amount: 1000, pix_key: bKey }, { idempotencyKey: key });
      expect(retry.status).toBe(200);
      expect(retry.headers.get('x-idempotent-replay')).toBe('true');
      expect(retry.body).toMatchObject({ worked: true, status: 'settled', amount: 100_000 });
      expect(await tefOuts()).toBe(outsBefore + 1); // not run twice
      expect((await balances(db, a.accountId)).available).toBe(before.available - 100_000);
      await expectLedgerConsistent(db);
    }, 60_000);
  }

  it('Database.transaction: a COMMIT answered with the WARNING rejects with CommitOutcomeUnknown, runs the work once and is not retried', async () => {
    await admin.query(`CREATE TABLE IF NOT EXISTS outcome_probe (id int PRIMARY KEY)`);
    const interrupter = interruptSyncWaits('cancel');
    let runs = 0;
    const err = await db
      .transaction(async (tx) => {
        runs++;
        await tx.query(`SELECT set_config('synchronous_commit', 'on', true)`);
        await tx.query('INSERT INTO outcome_probe (id) VALUES ($1)', [runs]);
      })
      .catch((e: unknown) => e);
    await interrupter.stop();
    expect(err).toBeInstanceOf(CommitOutcomeUnknown);
    expect(String((err as Error).message)).toMatch(/synchronous replication/);
    expect(runs).toBe(1);
    expect((await admin.query(`SELECT id FROM outcome_probe`)).rows).toEqual([{ id: 1 }]);
  }, 30_000);

  it('a COMMIT unanswered past statement_timeout + 2 s: the client gives up without cancelling anything (outcome unknown), and the server-side commit stands', async () => {
    // statement_timeout does not cover the wait of a COMMIT for its standby (PostgreSQL disarms it
    // before committing): only the client's query_timeout ends the wait, and it sends no cancel.
    const short = await openPostgres({ url: cluster.url, max: 2, statementTimeoutMs: 300 });
    try {
      const err = await short
        .transaction(async (tx) => {
          await tx.query(`SELECT set_config('synchronous_commit', 'on', true)`);
          await tx.query(`INSERT INTO outcome_probe (id) VALUES (100)`);
        })
        .catch((e: unknown) => e);
      expect(err).toBeInstanceOf(CommitOutcomeUnknown);
      expect(String((err as Error).message)).toMatch(/Query read timeout/);
      // Still waiting for the standby on the server: nobody cancelled it.
      const { rows } = await admin.query<{ pid: number }>(`SELECT pid FROM pg_stat_activity WHERE wait_event = 'SyncRep'`);
      expect(rows).toHaveLength(1);
      await admin.query('SELECT pg_cancel_backend($1)', [rows[0]!.pid]);
      for (let i = 0; i < 100 && (await admin.query(`SELECT 1 FROM outcome_probe WHERE id = 100`)).rows.length === 0; i++) await sleep(20);
      expect((await admin.query(`SELECT id FROM outcome_probe WHERE id = 100`)).rows).toEqual([{ id: 100 }]);
    } finally {
      await short.close();
    }
  }, 30_000);
});
