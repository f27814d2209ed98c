import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AppContext } from '../../src/context.js';
import type { Database } from '../../src/db/db.js';
import { DomainError } from '../../src/errors/catalog.js';
import { statusOf } from '../../src/http/errorMap.js';
import { cashOut, WAIT_LANE_MAX, type CashOutAnswer, type CashOutKey } from '../../src/pix/cashOut.js';
import { parseCashOut } from '../../src/pix/cashOutCommand.js';
import { merchantWithKey, type MerchantFixture } from '../helpers/client.js';
import { BACKENDS } from '../helpers/db.js';
import { expectLedgerConsistent, foreignKey, SIM_FAST, waitFor } from '../helpers/pix.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

/**
 * Issue 24: step 1 of cash-outs in batches under database faults (src/pix/cashOut.ts).
 *   item 3  one item's refusal by the database (a CHECK, a unique violation, a data error) fails
 *           that item alone; the other merchants' cash-outs of its batch are written
 *   item 4  an account whose books are locked elsewhere delays only its own cash-outs (the others
 *           complete while the lock is held), and the queue of cash-outs waiting for it is bounded
 *           (past it: 503 with Retry-After)
 *   item 5  an error that does not prove a rollback (57P01, XX000, … reported after the autocommit
 *           statement committed) is never taken as "nothing was written": no second reservation.
 */
const NO_KEY: CashOutKey = { resumes: null, bind: async () => {}, record: async () => {}, claim: null, prepare: () => null };
/** A key that binds with a statement of its own: its account's items go to the transaction under the locks. */
const KEY_ALONE: CashOutKey = { ...NO_KEY, claim: undefined };
const url = process.env.TEST_DATABASE_URL;

type Outcome = { ok: true; answer: CashOutAnswer } | { ok: false; status: number; code: string; error: unknown };

/** The one-statement reserve (repo.reserveCashOutsIfUnchanged). */
const RESERVE = /checked AS MATERIALIZED/;

/**
 * The app's database, where the next statement matching `pattern` runs for real (it commits) and
 * its caller is then told it failed with `code` — as PostgreSQL reports a shutdown (57P01) or an
 * internal error (XX000) after an autocommit statement committed.
 */
function failingAfterCommit(db: Database, pattern: RegExp, code: string): { db: Database; fired: () => boolean } {
  let armed = true;
  const query = async (text: string, params?: readonly unknown[]) => {
    const rows = await db.query(text, params);
    if (armed && pattern.test(text)) {
      armed = false;
      throw Object.assign(new Error('terminating connection due to administrator command'), { code, severity: 'FATAL' });
    }
    return rows;
  };
  const wrapped = new Proxy(db, {
    get: (target, prop) => (prop === 'query' ? query : Reflect.get(target, prop, target)),
  });
  return { db: wrapped as Database, fired: () => !armed };
}

describe.each(BACKENDS)('cash-out batches under faults on %s', (backend) => {
  let s: TestServer;
  let receiver: string;
  beforeAll(async () => {
    s = await startTestServer({ backend, env: SIM_FAST, workers: false });
    receiver = await foreignKey(s);
  });
  afterAll(async () => {
    await expectLedgerConsistent(s.ctx.db);
    await s?.close();
  });

  const send = (ctx: AppContext, m: MerchantFixture, body: Record<string, unknown>) => sendOn(ctx, m, NO_KEY, body);
  const sendWith = (m: MerchantFixture, key: CashOutKey, body: Record<string, unknown>) => sendOn(s.ctx, m, key, body);

  function sendOn(ctx: AppContext, m: MerchantFixture, key: CashOutKey, body: Record<string, unknown>): Promise<Outcome> {
    return cashOut(ctx, { merchantId: m.merchantId, accountId: m.accountId }, parseCashOut({ pix_key: receiver, ...body }), key).then(
      (answer): Outcome => ({ ok: true, answer }),
      (error: unknown): Outcome =>
        error instanceof DomainError
          ? { ok: false, status: statusOf(error.code), code: error.code, error }
          : { ok: false, status: 500, code: 'internal', error },
    );
  }

  /** A connection of its own to the test's PostgreSQL schema, in a transaction, and the sessions waiting for it. */
  async function otherSession() {
    const [{ schema }] = (await s.ctx.db.query<{ schema: string }>('SELECT current_schema() AS schema')) as [{ schema: string }];
    const c = new pg.Client({ connectionString: url });
    await c.connect();
    await c.query(`SET search_path TO ${schema}`);
    await c.query('BEGIN');
    const [{ pid }] = (await c.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows as [{ pid: number }];
    let open = true;
    return {
      query: (text: string, params?: unknown[]) => c.query(text, params),
      /** Sessions waiting for this one's locks, directly or behind another waiter. */
      waiters: async () =>
        (
          await s.ctx.db.query<{ n: number }>(
            `WITH RECURSIVE w(pid) AS (
               SELECT a.pid FROM pg_stat_activity a WHERE $1::int = ANY (pg_blocking_pids(a.pid))
               UNION
               SELECT a.pid FROM pg_stat_activity a JOIN w ON w.pid = ANY (pg_blocking_pids(a.pid)))
             SELECT count(*)::int AS n FROM w`,
            [pid],
          )
        )[0]!.n,
      end: async (how: 'COMMIT' | 'ROLLBACK') => {
        if (!open) return;
        open = false;
        await c.query(how);
        await c.end();
      },
    };
  }

  const reservations = async (m: MerchantFixture) =>
    (await s.ctx.db.query<{ n: number }>(`SELECT count(*)::int AS n FROM transactions WHERE account_id = $1 AND kind = 'cash_out'`, [m.accountId]))[0]!.n;

  describe.each(['57P01', '57P02', 'XX000', '08006'])('item 5: the reserve statement committed, then %s was reported', (code) => {
    it.each([
      ['an account this process reads first', false],
      ['an account this process knows (no read)', true],
    ])('%s: the request fails, one reservation only (never written again as if nothing happened)', async (_name, known) => {
      const m = await merchantWithKey(s, { depositCents: 100_000 });
      if (known) expect((await send(s.ctx, m, { amount: 100 })).ok).toBe(true);
      const before = await reservations(m);
      const faulty = failingAfterCommit(s.ctx.db, RESERVE, code);
      const ctx: AppContext = { ...s.ctx, db: faulty.db };
      const outcome = await send(ctx, m, { amount: 1000 });
      expect(faulty.fired()).toBe(true);
      expect(outcome.ok).toBe(false);
      expect((outcome as { error: { code?: string } }).error).toMatchObject({ code });
      expect(await reservations(m)).toBe(before + 1);
    });
  });

  describe('item 3: one item refused by the database fails alone', () => {
    beforeAll(async () => {
      // A refusal of the database for one item only: a cash-out record whose external_id starts
      // with "poison-" followed by a SQLSTATE fails its INSERT with that SQLSTATE.
      await s.ctx.db.exec(`
        CREATE FUNCTION test_poison() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
          IF NEW.kind = 'cash_out' AND NEW.external_id LIKE 'poison-%' THEN
            RAISE EXCEPTION 'poisoned item %', NEW.external_id USING ERRCODE = substr(NEW.external_id, 8, 5);
          END IF;
          RETURN NEW;
        END $$;
        CREATE TRIGGER test_poison BEFORE INSERT ON transactions FOR EACH ROW EXECUTE FUNCTION test_poison();`);
    });
    afterAll(async () => {
      await s.ctx.db.exec('DROP TRIGGER test_poison ON transactions; DROP FUNCTION test_poison();');
    });

    it.each(['23514', '23505', '22003', 'P0001'])('%s on one merchant\'s item: the other merchants\' cash-outs of the batch are written', async (code) => {
      const [guilty, ...others] = await Promise.all([1, 2, 3].map(() => merchantWithKey(s, { depositCents: 100_000 })));
      // Known and unknown accounts, and accounts whose keys bind alone: every path of step 1.
      if (code === '23514') for (const m of [guilty!, ...others]) expect((await send(s.ctx, m, { amount: 1 })).ok).toBe(true);
      const before = await Promise.all(others.map(reservations));
      const outcomes = await Promise.all([
        send(s.ctx, guilty!, { amount: 1000, external_id: `poison-${code}` }),
        ...others.map((m, i) => (i === 0 ? sendWith(m, KEY_ALONE, { amount: 1000, external_id: `fine-${code}` }) : send(s.ctx, m, { amount: 1000 }))),
      ]);
      expect(outcomes[0]!.ok).toBe(false);
      expect((outcomes[0] as { error: { code?: string } }).error).toMatchObject({ code });
      for (const o of outcomes.slice(1)) expect(o.ok, JSON.stringify(o)).toBe(true);
      expect(await Promise.all(others.map(reservations))).toEqual(before.map((n) => n + 1));
      expect(await reservations(guilty!)).toBe(code === '23514' ? 1 : 0);
    });

    it.skipIf(backend !== 'postgres')(
      'an external_id taken meanwhile by a writer that does not lock the books (a charge): that item answers 409 external_id_conflict, the others are written',
      async () => {
        const [guilty, other] = await Promise.all([1, 2].map(() => merchantWithKey(s, { depositCents: 100_000 })));
        const session = await otherSession();
        try {
          // A charge's record with the same external_id, not committed yet.
          await session.query(
            `INSERT INTO transactions (transaction_id, account_id, kind, type, direction, status, amount, external_id)
             VALUES ('PIXCHG-TEST-' || $1::text, $1::bigint, 'charge', 'pix', 'inbound', 2, 100, 'order-77')`,
            [guilty!.accountId],
          );
          const pending = Promise.all([
            sendWith(guilty!, KEY_ALONE, { amount: 1000, external_id: 'order-77' }),
            sendWith(other!, KEY_ALONE, { amount: 1000, external_id: 'order-77' }),
          ]);
          await waitFor(session.waiters, (n) => n >= 1, 20_000);
          await session.end('COMMIT');
          const [mine, theirs] = await pending;
          expect(mine).toMatchObject({ ok: false, status: 409, code: 'external_id_conflict' });
          expect(theirs!.ok, JSON.stringify(theirs)).toBe(true);
        } finally {
          await session.end('ROLLBACK');
        }
      },
    );
  });

  describe.skipIf(backend !== 'postgres')('item 4: an account whose books are locked elsewhere holds up only its own cash-outs', () => {
    it("another merchant's cash-out completes while the lock is held; the blocked account's completes after", async () => {
      const [blocked, unrelated] = await Promise.all([1, 2].map(() => merchantWithKey(s, { depositCents: 100_000 })));
      for (const m of [blocked!, unrelated!]) expect((await m.client.post('/pix/cash-out', { amount: 1, pix_key: receiver })).status).toBe(200);
      const session = await otherSession();
      try {
        await session.query('SELECT id FROM ledger_accounts WHERE account_id = $1 ORDER BY id FOR UPDATE', [blocked!.accountId]);
        let blockedDone = false;
        const waiting = blocked!.client.post('/pix/cash-out', { amount: 500, pix_key: receiver }).finally(() => (blockedDone = true));
        await waitFor(session.waiters, (n) => n >= 1, 20_000);
        // The first cash-out of an account new to the process (a read), then one it knows (no read).
        const fresh = await merchantWithKey(s, { depositCents: 100_000 });
        for (const m of [fresh, unrelated!]) {
          const res = await m.client.post('/pix/cash-out', { amount: 700, pix_key: receiver });
          expect(res.status, JSON.stringify(res.body)).toBe(200);
        }
        expect(blockedDone).toBe(false);
        await session.end('ROLLBACK');
        expect((await waiting).status).toBe(200);
      } finally {
        await session.end('ROLLBACK');
      }
    });

    it("the cash-outs waiting for a locked account are bounded: past the bound, 503 with Retry-After in the API's 503 shape; the others complete once it is free", async () => {
      const blocked = await merchantWithKey(s, { depositCents: 100_000 });
      expect((await blocked.client.post('/pix/cash-out', { amount: 1, pix_key: receiver })).status).toBe(200);
      const session = await otherSession();
      try {
        await session.query('SELECT id FROM ledger_accounts WHERE account_id = $1 ORDER BY id FOR UPDATE', [blocked.accountId]);
        const first = blocked.client.post('/pix/cash-out', { amount: 1, pix_key: receiver });
        await waitFor(session.waiters, (n) => n >= 1, 20_000);
        const answered: { status: number; headers: Headers; body: any }[] = [];
        const rest = Array.from({ length: WAIT_LANE_MAX + 1 }, () =>
          blocked.client.post('/pix/cash-out', { amount: 1, pix_key: receiver }).then((res) => (answered.push(res), res)),
        );
        const refused = await waitFor(
          async () => answered.find((r) => r.status === 503),
          (r) => r !== undefined,
          20_000,
        );
        expect(refused!.headers.get('retry-after')).toMatch(/^\d+$/);
        expect(refused!.body).toEqual({
          worked: false,
          errors: { service_unavailable: expect.stringMatching(/not executed/) },
          code: 'service_unavailable',
          detail: expect.stringMatching(/not executed/),
        });
        expect(answered.every((r) => r.status === 503)).toBe(true); // the others still wait for the lock
        await session.end('ROLLBACK');
        const all = await Promise.all([first, ...rest]);
        expect(all.filter((r) => r.status === 503)).toHaveLength(1);
        expect(all.filter((r) => r.status === 200)).toHaveLength(WAIT_LANE_MAX + 1);
      } finally {
        await session.end('ROLLBACK');
      }
    });
  });
});
