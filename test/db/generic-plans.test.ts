import { randomBytes, randomUUID } from 'node:crypto';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Database, Sql } from '../../src/db/db.js';
import { systemClock } from '../../src/lib/clock.js';
import { createMerchant, deposit } from '../../src/merchants/service.js';
import * as repo from '../../src/pix/repository.js';
import { openTestDatabase, type TestDatabase } from '../helpers/db.js';

/**
 * Issue 12: the prepared statement of step 1 of a cash-out batch (`reserveCashOutsIfUnchanged`,
 * the statement of every batch of known accounts) runs on PostgreSQL's generic plan after its
 * first runs instead of being planned again on every run — planning it took 1.2 ms of each run's
 * 4.6 ms when its limit windows were arrays, whose length a custom plan knows (docs/decisions.md,
 * "Generic plans for step 1"). PostgreSQL keeps a generic plan once it is estimated no dearer
 * than the custom ones, so this compares the two estimates (EXPLAIN EXECUTE under each
 * plan_cache_mode) for real batches on the pool's only connection, rather than counting the plans
 * in pg_prepared_statements: those counts can also move with cache invalidations (the DDL of
 * tests running in parallel sends many; a first version of this test counted them and failed in CI).
 * PostgreSQL only: PGlite's adapter prepares nothing, so every run there is planned anyway.
 */
const url = process.env.TEST_DATABASE_URL;
const ACCOUNTS = 13;

describe.skipIf(!url)('plans of the cash-out statements on postgres', () => {
  let t: TestDatabase;
  let db: Database;
  beforeAll(async () => {
    // One connection: the prepared statement explained is the one the repository's runs made.
    t = await openTestDatabase('postgres', { poolMax: 1 });
    db = t.db;
  });
  afterAll(async () => {
    await t?.close();
  });

  /** A statement as the repository sent it. */
  type Sent = { text: string; params: readonly unknown[] };
  type PlanMode = 'force_custom_plan' | 'force_generic_plan';

  /** `db` as the repository sees it, every statement recorded on its way to the database. */
  function recording(): { sql: Sql; sent: Sent[] } {
    const sent: Sent[] = [];
    return { sent, sql: { query: (text, params = []) => (sent.push({ text, params }), db.query(text, params)), exec: (script) => db.exec(script) } };
  }

  /** Statistics of every table of the schema, as autovacuum keeps them on a live database. */
  async function analyzeAll(): Promise<void> {
    const tables = await db.query<{ t: string }>(`SELECT format('%I.%I', schemaname, tablename) AS t FROM pg_tables WHERE schemaname = current_schema()`);
    await db.query(`ANALYZE ${tables.map((r) => r.t).join(', ')}`);
  }

  /** The plan (EXPLAIN text) PostgreSQL makes of the prepared statement `st` for its parameters, in one plan_cache_mode. */
  async function explainPrepared(st: Sent, mode: PlanMode): Promise<string> {
    const [prepared] = await db.query<{ name: string }>(`SELECT name FROM pg_prepared_statements WHERE statement = $1`, [st.text]);
    await db.query(`SET plan_cache_mode = ${mode}`);
    try {
      // EXPLAIN EXECUTE takes no bind parameters: the values go as literals (all are jsonb text).
      const literals = st.params.map((p) => pg.escapeLiteral(String(p))).join(', ');
      return (await db.query<Record<string, string>>(`EXPLAIN EXECUTE ${prepared!.name}(${literals})`)).map((r) => Object.values(r)[0]).join('\n');
    } finally {
      await db.query('RESET plan_cache_mode');
    }
  }

  /** A merchant with a funded account, and its configuration as step 1 remembers it from an earlier read. */
  async function fundedAccount(name: string) {
    const { merchant, account } = await createMerchant(db, { name, document: '11222333000181' });
    await deposit(db, systemClock, { accountId: account.id, amountCents: 1_000_000 });
    return {
      merchantId: merchant.id,
      accountId: account.id,
      config: {
        merchant_id: merchant.id,
        cash_out_fee_cents: account.cash_out_fee_cents,
        cash_out_max_amount_cents: account.cash_out_max_amount_cents,
        cash_out_daily_limit_cents: account.cash_out_daily_limit_cents,
        cash_out_nighttime_limit_cents: account.cash_out_nighttime_limit_cents,
        holder_name: merchant.name,
        holder_document: merchant.document,
      },
    };
  }

  /** A cash-out of 100 cents from `account` as step 1 writes it, without an Idempotency-Key. */
  function newCashOut(account: { merchantId: number; accountId: number }, tag: string, externalId: string | null, now: Date): repo.NewCashOut {
    return {
      id: randomUUID(),
      account_id: account.accountId,
      merchant_id: account.merchantId,
      transaction_id: `${tag}${randomBytes(4).toString('hex')}`,
      end_to_end_id: `E00000000${Date.now()}${tag}`.slice(0, 32),
      external_id: externalId,
      amount: 100,
      fee_amount: 0,
      description: '',
      counterparty_name: 'Receiver',
      recipient_key: 'receiver@example.com',
      recipient_key_type: 'email',
      recipient_document: '52998224725',
      recipient_ispb: '18236120',
      recipient_bank_name: null,
      request_fingerprint: 'f'.repeat(64),
      payer_name: 'Loja',
      payer_document: '11444777000161',
      metadata: {},
      created_at: now,
      claim: null,
    };
  }

  /** The stage-2 marks of records the rail took (pix.payout.processing), without answers to record. */
  const processingMarks = (rows: readonly repo.OwnedTransaction[]): repo.SentMark[] =>
    rows.map((row) => ({ row, paymentStatus: 'processing', now: new Date(), event: { event: 'pix.payout.processing', body: { id: row.id } }, answer: null }));

  it('the reserve statement is never estimated cheaper planned for its parameters than by its generic plan, so PostgreSQL keeps the generic plan', async () => {
    const accounts = [];
    for (let a = 0; a < ACCOUNTS; a++) accounts.push(await fundedAccount(`Loja Plano ${a}`));
    // An account's history of limit windows (one row per day it sent something), and statistics
    // as autovacuum keeps them on a live database.
    await db.query(
      `INSERT INTO cash_out_usage (account_id, window_kind, window_start, amount)
       SELECT a.id, 'day', now() - make_interval(days => d), 100 FROM accounts a CROSS JOIN generate_series(1, 2000) d`,
    );
    await analyzeAll();
    const now = new Date();
    const windows: repo.UsageWindow[] = [{ kind: 'day', start: new Date(now.getTime() - 60_000) }];
    const runs = 10;
    const costs: { generic: number; custom: number }[] = [];
    /** The estimated total cost of the prepared statement for these parameters, in one plan mode. */
    const cost = async (st: Sent, mode: PlanMode) => Number(/cost=[\d.]+\.\.([\d.]+)/.exec(await explainPrepared(st, mode))![1]);
    for (let run = 0; run < runs; run++) {
      // Batches of 4 to 13 cash-outs, one per account, as under load: a custom plan would see
      // each batch's own sizes.
      const batch = accounts.slice(0, 4 + (run % 10));
      const items = batch.map((account, k) => newCashOut(account, `PLAN${run}x${k}`, `plan-${run}-${k}`, now));
      const checked: repo.CheckedAccount[] = batch.map(({ accountId, config }) => ({ account_id: accountId, exact: false, debit: 100, caps: { day: 1e12 }, config }));
      const { sql, sent } = recording();
      const written = await repo.reserveCashOutsIfUnchanged(sql, items, windows, checked);
      costs.push({ generic: await cost(sent[0]!, 'force_generic_plan'), custom: await cost(sent[0]!, 'force_custom_plan') });
      expect(written.unchanged).toEqual(new Set(batch.map((b) => b.accountId)));
      expect(written.rows.map((r) => r.transaction_id)).toEqual(items.map((i) => i.transaction_id));
    }
    // PostgreSQL keeps the generic plan of a prepared statement once it is estimated no dearer
    // than the custom plans (plus their planning). Each batch's custom plan is estimated at least
    // as dear as the generic one; with the windows as arrays, every one of these was cheaper.
    for (const c of costs) expect(c.custom).toBeGreaterThanOrEqual(c.generic);
  });

  it('the stage-2 record finds its records by primary key, never by a scan of transactions, under either plan', async () => {
    const { merchant, account } = await createMerchant(db, { name: 'Loja Plano Envio', document: '11222333000181' });
    // A history of final records and a few at stage 1, with statistics as autovacuum keeps them:
    // "stage < 2" is then estimated at a row or two, which made a nested loop over a scan of the
    // whole table look cheapest (seen under the bench: every stage-2 batch read every record).
    await db.query(
      `INSERT INTO transactions (transaction_id, account_id, kind, type, direction, status, payment_status, stage, end_to_end_id, amount, payer_name, payer_document)
       SELECT 'HIST' || g, $1, 'cash_out', 'pix', 'outbound', 1, 'settled', 3, 'EHIST' || g, 100, 'Loja', '11444777000161' FROM generate_series(1, 5000) g`,
      [account.id],
    );
    const ids = (
      await db.query<{ id: string }>(
        `INSERT INTO transactions (transaction_id, account_id, kind, type, direction, status, payment_status, stage, end_to_end_id, amount, payer_name, payer_document)
         SELECT 'SENT' || g, $1, 'cash_out', 'pix', 'outbound', 2, 'processing', 1, 'ESENT' || g, 100, 'Loja', '11444777000161' FROM generate_series(1, 12) g RETURNING id`,
        [account.id],
      )
    ).map((r) => r.id);
    await analyzeAll();
    const { sql, sent } = recording();
    const marks = (batch: string[]) => processingMarks(batch.map((id) => ({ id, merchant_id: merchant.id }) as repo.OwnedTransaction));
    for (let k = 0; k < 6; k++) expect(await repo.markSentWithEvents(sql, marks(ids.slice(2 * k, 2 * k + 2)))).toEqual([{ recorded: false }, { recorded: false }]);
    for (const mode of ['force_custom_plan', 'force_generic_plan'] as const) {
      const plan = await explainPrepared(sent[0]!, mode);
      // An index scan of the primary key, or a bitmap of it: one probe per id either way.
      expect(plan).toMatch(/Index Scan (using|on) transactions_pkey/);
      expect(plan).not.toMatch(/Seq Scan on transactions/);
    }
  });

  it('the idempotency answers of both statements, and the reserve’s configuration check, read by primary key, never by a scan of idempotency_keys or accounts, under either plan', async () => {
    const account = await fundedAccount('Loja Plano Chaves');
    // A day of answered keys (signed v2 requests keep theirs 24 h), with statistics: joined on
    // the batch's claims (estimated at 100 rows), a hash join over a scan of the whole table
    // looked cheapest, and every batch read every key — those of cash-outs without a key too.
    await db.query(
      `WITH k AS (
         INSERT INTO idempotency_keys (merchant_id, method, path, key, request_hash, status, owner_token, locked_until, response_status, expires_at)
         SELECT $1, 'POST', '/api/external/cpf/validate', 'k' || g, 'h', 'completed', gen_random_uuid(), now(), 200, now() + interval '1 day'
           FROM generate_series(1, 20000) g
         RETURNING id, expires_at)
       INSERT INTO idempotency_responses (key_id, expires_at, body) SELECT id, expires_at, '{}' FROM k`,
      [account.merchantId],
    );
    // And many merchants: the reserve statement's check that a remembered configuration still
    // stands must read the batch's accounts, not join every account with its merchant.
    await db.query(`INSERT INTO merchants (name, document) SELECT 'Loja ' || g, '11222333000181' FROM generate_series(1, 20000) g`);
    await db.query(`INSERT INTO accounts (merchant_id) SELECT id FROM merchants WHERE name LIKE 'Loja %' AND NOT EXISTS (SELECT 1 FROM accounts a WHERE a.merchant_id = merchants.id)`);
    await analyzeAll();
    const now = new Date();
    const windows: repo.UsageWindow[] = [{ kind: 'day', start: new Date(now.getTime() - 60_000) }];
    const { sql, sent } = recording();
    const items = [0, 1].map((k) => newCashOut(account, `KEYS${k}`, null, now));
    const checked: repo.CheckedAccount[] = [{ account_id: account.accountId, exact: false, debit: 200, caps: { day: 1e12 }, config: account.config }];
    const written = await repo.reserveCashOutsIfUnchanged(sql, items, windows, checked);
    expect(written.rows).toHaveLength(2);
    const reserve = sent[0]!;
    expect(await repo.markSentWithEvents(sql, processingMarks(written.rows))).toEqual([{ recorded: false }, { recorded: false }]);
    const stage2 = sent.at(-1)!;
    for (const st of [reserve, stage2]) {
      for (const mode of ['force_custom_plan', 'force_generic_plan'] as const) {
        const plan = await explainPrepared(st, mode);
        expect(plan).toMatch(/idempotency_keys_pkey/);
        expect(plan).not.toMatch(/Seq Scan on (idempotency_keys|idempotency_responses\w*|accounts|merchants)\b/);
      }
    }
  });
});
