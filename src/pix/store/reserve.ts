import { LOCK_NOT_AVAILABLE, sqlState, type Sql } from '../../db/db.js';
import type { OwnedTransaction, TransactionRow } from '../../transactions/records.js';
import type { UsageWindow } from './limitWindows.js';
import type { CashOutLockState } from './reserveRead.js';

/** Step 1 of cash-outs in few round trips (issue 12): the statements that write a batch's records and reservations. */

export interface NewCashOut {
  id: string;
  account_id: number;
  merchant_id: number;
  transaction_id: string;
  end_to_end_id: string;
  external_id: string | null;
  amount: number;
  fee_amount: number;
  description: string;
  counterparty_name: string;
  recipient_key: string;
  recipient_key_type: string;
  recipient_document: string;
  recipient_ispb: string;
  /** The receiver's bank as the directory named it. */
  recipient_bank_name: string | null;
  request_fingerprint: string;
  /** The payer of the payment order: the account's holder. */
  payer_name: string;
  payer_document: string;
  metadata: Record<string, unknown>;
  created_at: Date;
  /** The Idempotency-Key claim to bind to the record (id, owner token), if any. */
  claim: { id: number; token: string } | null;
}

/** The items of a batch of accepted cash-outs, as the statements below take them (`$1`). */
const CASH_OUT_ITEMS = `items AS MATERIALIZED (
       SELECT * FROM jsonb_to_recordset($1::jsonb) AS x(
         n int, id uuid, account_id bigint, transaction_id text, end_to_end_id text, external_id text, amount bigint, fee_amount bigint,
         description text, counterparty_name text, recipient_key text, recipient_key_type text, recipient_document text,
         recipient_ispb text, recipient_bank_name text, request_fingerprint text, payer_name text, payer_document text, metadata jsonb, created_at timestamptz, claim_id bigint, claim_token uuid))`;

/**
 * The limit windows of a batch (`$2`, `cashOutWindowsJson`) as the writing statements take them.
 * A jsonb row set, not arrays: the planner estimates it the same whatever it holds (as `items`),
 * so a custom plan is never cheaper than the generic one and PostgreSQL keeps the generic plan of
 * the prepared statement instead of planning it again on every run — with `unnest` of arrays a
 * custom plan knew the windows' exact count and looked cheaper, and planning the reserve
 * statement took 1.2 ms of each run's 4.6 (docs/decisions.md, "Generic plans for step 1").
 */
const CASH_OUT_WINDOWS = `windows AS MATERIALIZED (SELECT * FROM jsonb_to_recordset($2::jsonb) AS w(kind text, start timestamptz))`;

function cashOutWindowsJson(windows: readonly UsageWindow[]): string {
  return JSON.stringify(windows.map((w) => ({ kind: w.kind, start: w.start.toISOString() })));
}

/**
 * The writes of step 1 for the cash-outs of the CTE `source` (the shape of `items`), with the
 * limit windows of the CTE `windows`: the usage windows counted (each account's sum), the records,
 * one ledger transaction available -> pending (amount + fee) per record, and each Idempotency-Key
 * bound to its record (CTEs usage, records, lt, entries, bound).
 */
function cashOutWrites(source: string): string {
  return `usage AS (
       INSERT INTO cash_out_usage (account_id, window_kind, window_start, amount)
       SELECT i.account_id, w.kind, w.start, sum(i.amount) FROM ${source} i CROSS JOIN windows w
        GROUP BY i.account_id, w.kind, w.start ORDER BY i.account_id, w.kind
       ON CONFLICT (account_id, window_kind, window_start) DO UPDATE SET amount = cash_out_usage.amount + EXCLUDED.amount
       RETURNING 1),
     records AS (
       INSERT INTO transactions (id, transaction_id, account_id, kind, type, direction, status, payment_status, stage,
         end_to_end_id, external_id, amount, fee_amount, description, counterparty_name, recipient_key, recipient_key_type,
         recipient_document, recipient_ispb, recipient_bank_name, request_fingerprint, payer_name, payer_document, limit_day_start, limit_night_start,
         metadata, created_at)
       SELECT id, transaction_id, account_id, 'cash_out', 'pix', 'outbound', 2, 'processing', 1,
         end_to_end_id, external_id, amount, fee_amount, description, counterparty_name, recipient_key, recipient_key_type,
         recipient_document, recipient_ispb, recipient_bank_name, request_fingerprint, payer_name, payer_document,
         (SELECT start FROM windows WHERE kind = 'day'), (SELECT start FROM windows WHERE kind = 'night'), metadata, created_at
         FROM ${source} ORDER BY n
       RETURNING *),
     lt AS (
       INSERT INTO ledger_transactions (kind, reference)
       SELECT 'cash_out_reserve', transaction_id FROM ${source} ORDER BY n RETURNING id, reference),
     entries AS (
       INSERT INTO ledger_entries (ledger_transaction_id, ledger_account_id, amount)
       SELECT lt.id, la.id, CASE WHEN la.book = 'available' THEN -(i.amount + i.fee_amount) ELSE i.amount + i.fee_amount END
         FROM lt JOIN ${source} i ON i.transaction_id = lt.reference
         JOIN ledger_accounts la ON la.account_id = i.account_id AND la.book IN ('available', 'pending')
        ORDER BY la.id, i.n
       RETURNING 1),
     bound AS (
       UPDATE idempotency_keys k SET resource_id = i.id::text FROM ${source} i
        WHERE k.id = i.claim_id AND k.owner_token = i.claim_token AND k.status = 'in_progress' AND k.resource_id IS NULL
       RETURNING k.id)`;
}

function cashOutItemsJson(items: readonly NewCashOut[]): string {
  return JSON.stringify(items.map((i, n) => ({ ...i, n, claim_id: i.claim?.id ?? null, claim_token: i.claim?.token ?? null, claim: undefined })));
}

type WrittenRow = TransactionRow & { n: number };

function ownedRows(items: readonly NewCashOut[], rows: readonly WrittenRow[]): OwnedTransaction[] {
  return rows.map(({ n, ...row }) => ({ ...row, merchant_id: items[n]!.merchant_id }));
}

const INSERT_CASH_OUTS = `WITH ${CASH_OUT_ITEMS},
     ${CASH_OUT_WINDOWS},
     ${cashOutWrites('items')}
     SELECT r.*, i.n, (SELECT array_agg(id) FROM bound) AS bound, (SELECT count(*) FROM entries)::int AS entry_count
       FROM records r JOIN items i ON i.id = r.id ORDER BY i.n`;

/**
 * One statement for the writes of step 1 of a batch of accepted cash-outs (their accounts' books
 * locked by `lockForCashOuts`, in the caller's transaction): `cashOutWrites`. Returns the records
 * (in `items` order) and the claim ids bound; the caller checks that every claim was bound (else it
 * rolls back: the key was lost).
 */
export async function insertCashOuts(
  tx: Sql,
  items: readonly NewCashOut[],
  windows: readonly UsageWindow[],
): Promise<{ rows: OwnedTransaction[]; bound: Set<number> }> {
  const rows = await tx.query<WrittenRow & { bound: number[] | null; entry_count: number }>(INSERT_CASH_OUTS, [cashOutItemsJson(items), cashOutWindowsJson(windows)]);
  if (rows.length !== items.length || rows[0]!.entry_count !== 2 * items.length) {
    throw new Error(`cash-out batch: ${rows.length} records written for ${items.length}`);
  }
  const bound = new Set((rows[0]!.bound ?? []).map(Number));
  return { bound, rows: ownedRows(items, rows.map(({ bound: _b, entry_count: _e, ...row }) => row)) };
}

/**
 * What must still hold, under the locks, of an account whose items step 1 checked on a read
 * without locks, for its decisions to stand (see `reserveCashOutsIfUnchanged`).
 */
export type CheckedAccount =
  | {
      /** Some item was refused (balance or limit): the figures the checks saw, exactly. */
      account_id: number;
      exact: true;
      /** The available book's balance: the safe balance (see `toBalances`). */
      available: number;
      /** Sent so far in each window, by window kind (absent: nothing). */
      usage: Record<string, number>;
    }
  | {
      /** Every item was accepted: they must still fit. */
      account_id: number;
      exact: false;
      /** What the accepted items take from the available book (amounts + fees). */
      debit: number;
      /** The most each window may have sent so far for the accepted items to fit in its limit. */
      caps: Record<string, number>;
      /**
       * Set when the decisions were made on the configuration remembered from an earlier read
       * (no read of this batch): the account's row (fee, limits, holder) must still be this.
       */
      config?: CashOutAccountConfig;
    };

/** What step 1 takes from an account's configuration: its records' fee and payer, its limits. */
export type CashOutAccountConfig = Pick<
  CashOutLockState,
  'merchant_id' | 'cash_out_fee_cents' | 'cash_out_max_amount_cents' | 'cash_out_daily_limit_cents' | 'cash_out_nighttime_limit_cents' | 'holder_name' | 'holder_document'
>;

/**
 * How long the reserve statement waits for books another transaction holds before it gives up
 * (`brief`): a batch holds them for the few milliseconds of its statement, so under contention
 * (another process's batch, a settlement) the wait is short and the statement goes through; past
 * this, the books are held by something long (a MED transaction) and the statement runs again with
 * SKIP LOCKED to find which account it was.
 */
export const RESERVE_LOCK_WAIT_MS = 100;

/**
 * The reserve statement, taking the books `wait`ing for them (up to lock_timeout), waiting
 * `brief`ly (RESERVE_LOCK_WAIT_MS, for this statement only: set_config(…, true) in an autocommit
 * statement lasts until its commit), or `skip`ping those held elsewhere (SKIP LOCKED).
 * (Over 70 lines: it is the text of one SQL statement, read and plan-tested as one.)
 */
function reserveCashOutsSql(lock: 'wait' | 'brief' | 'skip'): string {
  return `WITH ${CASH_OUT_ITEMS},
     ${CASH_OUT_WINDOWS},
     checked AS MATERIALIZED (
       SELECT * FROM jsonb_to_recordset($3::jsonb) AS c(account_id bigint, exact boolean, available bigint, usage jsonb, debit bigint, caps jsonb, config jsonb)),
     ${lock === 'brief' ? `lock_wait AS MATERIALIZED (SELECT set_config('lock_timeout', '${RESERVE_LOCK_WAIT_MS}ms', true) AS t),
     ` : ''}locked AS MATERIALIZED (
       SELECT id, account_id, book, balance, xmin::text AS version FROM ledger_accounts
        WHERE account_id IN (SELECT account_id FROM checked)${lock === 'brief' ? ' AND (SELECT t FROM lock_wait) IS NOT NULL' : ''}
        ORDER BY id FOR UPDATE${lock === 'skip' ? ' SKIP LOCKED' : ''}),
     -- The accounts whose books are all locked (with SKIP LOCKED, the others are busy elsewhere).
     whole AS MATERIALIZED (${
       lock === 'skip'
         ? `
       SELECT c.account_id FROM checked c
        WHERE (SELECT count(*) FROM locked l WHERE l.account_id = c.account_id) = (SELECT count(*) FROM ledger_accounts s WHERE s.account_id = c.account_id)`
         : 'SELECT account_id FROM checked'
     }),
     used AS MATERIALIZED (
       SELECT u.account_id, u.window_kind, u.amount FROM cash_out_usage u
        WHERE u.account_id IN (SELECT account_id FROM whole)
          AND (u.window_kind, u.window_start) IN (SELECT kind, start FROM windows)
        ORDER BY u.account_id, u.window_kind FOR UPDATE),
     claims AS MATERIALIZED (
       SELECT i.account_id, (k.owner_token = i.claim_token AND k.status = 'in_progress' AND k.resource_id IS NULL) AS owned
         FROM items i JOIN idempotency_keys k ON k.id = i.claim_id
        ORDER BY k.id FOR UPDATE OF k),
     unchanged AS MATERIALIZED (
       SELECT c.account_id FROM checked c
         CROSS JOIN LATERAL (SELECT (SELECT l.balance FROM locked l WHERE l.account_id = c.account_id AND l.book = 'available') AS available) b
        WHERE c.account_id IN (SELECT account_id FROM whole)
          AND CASE WHEN c.exact THEN b.available = c.available ELSE b.available >= c.debit END
          AND NOT EXISTS (
            SELECT 1 FROM windows w
             CROSS JOIN LATERAL (SELECT COALESCE((SELECT u.amount FROM used u WHERE u.account_id = c.account_id AND u.window_kind = w.kind), 0) AS sent) n
             WHERE CASE WHEN c.exact THEN n.sent <> COALESCE((c.usage ->> w.kind)::bigint, 0) ELSE n.sent > (c.caps ->> w.kind)::bigint END)
          AND NOT EXISTS (SELECT 1 FROM claims k WHERE k.account_id = c.account_id AND NOT k.owned)
          -- A usage row inserted by a transaction this statement waited for is not in its snapshot
          -- (a locked row is read as of its lock; a row that did not exist is not read at all): an
          -- account whose books moved after the snapshot (a version newer than the snapshot's)
          -- and which lacks a window's row is decided again under the locks (reserveLocked reads
          -- after its locks). Rows that existed are read as of their lock (FOR UPDATE above).
          AND NOT (
            EXISTS (SELECT 1 FROM locked l JOIN ledger_accounts s ON s.id = l.id WHERE l.account_id = c.account_id AND s.xmin::text <> l.version)
            AND EXISTS (SELECT 1 FROM windows w WHERE NOT EXISTS (SELECT 1 FROM used u WHERE u.account_id = c.account_id AND u.window_kind = w.kind)))
          -- Decisions made on a remembered configuration: the account's row still says the same.
          AND (c.config IS NULL OR EXISTS (
            SELECT 1 FROM accounts a JOIN merchants m ON m.id = a.merchant_id
             WHERE a.id = c.account_id AND a.merchant_id = (c.config ->> 'merchant_id')::bigint
               AND a.cash_out_fee_cents = (c.config ->> 'cash_out_fee_cents')::bigint
               AND a.cash_out_max_amount_cents = (c.config ->> 'cash_out_max_amount_cents')::bigint
               AND a.cash_out_daily_limit_cents = (c.config ->> 'cash_out_daily_limit_cents')::bigint
               AND a.cash_out_nighttime_limit_cents = (c.config ->> 'cash_out_nighttime_limit_cents')::bigint
               AND m.name = c.config ->> 'holder_name' AND m.document = c.config ->> 'holder_document'))
          -- No external_id of its items taken meanwhile (or, without a read, before): one probe of
          -- the unique index each; such an account is decided again on a read (a repeat).
          AND NOT EXISTS (
            SELECT 1 FROM items i CROSS JOIN LATERAL (
                SELECT 1 FROM transactions t WHERE t.account_id = i.account_id AND t.external_id = i.external_id LIMIT 1) taken
             WHERE i.account_id = c.account_id AND i.external_id IS NOT NULL)),
     ok AS MATERIALIZED (SELECT i.* FROM items i WHERE i.account_id IN (SELECT account_id FROM unchanged)),
     ${cashOutWrites('ok')},
     -- Selected below so that it runs (a CTE nobody reads is not evaluated); a false one aborts.
     checks AS (
       SELECT statement_assert((SELECT count(*) FROM entries) = 2 * (SELECT count(*) FROM ok), 'cash-out reserve: ledger entries missing')
          AND statement_assert((SELECT count(*) FROM bound) = (SELECT count(*) FROM ok WHERE claim_id IS NOT NULL), 'cash-out reserve: an Idempotency-Key not bound')
          AND statement_assert((SELECT count(*) FROM records) = (SELECT count(*) FROM ok), 'cash-out reserve: records missing') AS ok)
     -- The accounts that stood go once, on the first row (each row parsed them again in the driver).
     SELECT r.*, i.n, CASE WHEN i.n IS NOT DISTINCT FROM (SELECT min(n) FROM ok) THEN (SELECT array_agg(account_id) FROM unchanged) END AS unchanged,
            CASE WHEN i.n IS NOT DISTINCT FROM (SELECT min(n) FROM ok)
                 THEN (SELECT array_agg(account_id) FROM checked WHERE account_id NOT IN (SELECT account_id FROM whole)) END AS busy,
            (SELECT ok FROM checks) AS asserted
       FROM (SELECT 1) one LEFT JOIN (records r JOIN ok i ON i.id = r.id) ON true ORDER BY i.n`;
}
const RESERVE_CASH_OUTS_IF_UNCHANGED = reserveCashOutsSql('wait');
const RESERVE_CASH_OUTS_IF_UNCHANGED_BRIEFLY = reserveCashOutsSql('brief');
const RESERVE_FREE_CASH_OUTS_IF_UNCHANGED = reserveCashOutsSql('skip');

/**
 * Step 1 of a batch of cash-outs whose checks ran on a read without locks (`readForCashOuts`) —
 * or on no read at all, on the configuration remembered from an earlier one (`config`) — in
 * ONE statement, outside any transaction (one round trip, and the books locked only while it runs
 * and commits): it locks the books of the accounts (ledger account id order, as every money
 * movement), the usage rows of the windows and the Idempotency-Keys to bind, then writes (as
 * `insertCashOuts`) the items of each account whose decisions still stand as of the locks and
 * whose keys are all still held. Decisions stand when
 *   - every item of the account was accepted: its available balance (the safe balance) still
 *     covers their debits and every window's usage still leaves room for their amounts — the
 *     checks under the locks would accept each of them, in the same order;
 *   - else (a refusal): its available balance and its usage in every window are exactly what the
 *     checks saw, so a refusal (and its detail) is never made against figures that changed;
 * and, in both cases, none of its items' external_ids is taken and, with `config`, the account's
 * fee, limits and holder are still those the records were made with.
 * The items of the other accounts are not written: the caller checks them again (on a read, or
 * under the locks: `lockForCashOuts`). An item's external_id taken by a transaction that commits
 * while the statement runs fails the statement (unique constraint): nothing of it is written.
 *
 * Every change of a book's available balance or of a usage row happens under the lock of the
 * account's books, and every usage increase together with a change of those books, so the figures
 * read under the locks are those the next change starts from — except a usage row created by a
 * transaction the statement waited for, which its snapshot (taken before the wait) does not hold:
 * such an account (books newer than the snapshot, a window's row missing) is not written here but
 * decided again under the locks (issue 24). The statement's own invariants (entries, bound keys,
 * records) are asserted inside it (`statement_assert`), and the usage it writes is checked against
 * the account's limits by the database (migration 0700), so it commits all of them or nothing.
 *
 * `brief`: the statement waits for books held elsewhere at most RESERVE_LOCK_WAIT_MS; past it, it
 * runs again taking only the books free now (SKIP LOCKED): an account with a book held by another
 * transaction is not written and comes back in `busy` (the caller runs its items apart, waiting for
 * its books), so one account held long elsewhere never holds up the others.
 */
export async function reserveCashOutsIfUnchanged(
  sql: Sql,
  items: readonly NewCashOut[],
  windows: readonly UsageWindow[],
  checked: readonly CheckedAccount[],
  options: { brief?: boolean } = {},
): Promise<{ rows: OwnedTransaction[]; unchanged: Set<number>; busy: Set<number> }> {
  const params = [cashOutItemsJson(items), cashOutWindowsJson(windows), JSON.stringify(checked)];
  type Row = WrittenRow & { unchanged: number[] | null; busy: number[] | null; asserted: boolean };
  let rows: Row[];
  if (!options.brief) rows = await sql.query<Row>(RESERVE_CASH_OUTS_IF_UNCHANGED, params);
  else {
    try {
      rows = await sql.query<Row>(RESERVE_CASH_OUTS_IF_UNCHANGED_BRIEFLY, params);
    } catch (err) {
      // Raised while waiting: nothing was written.
      if (sqlState(err) !== LOCK_NOT_AVAILABLE) throw err;
      rows = await sql.query<Row>(RESERVE_FREE_CASH_OUTS_IF_UNCHANGED, params);
    }
  }
  const unchanged = new Set((rows[0]?.unchanged ?? []).map(Number));
  const busy = new Set((rows[0]?.busy ?? []).map(Number));
  // One row even when nothing was written (the LEFT JOIN): those carry no record.
  const written = rows.filter((r) => r.id !== null).map(({ unchanged: _u, busy: _b, asserted: _a, ...row }) => row);
  return { unchanged, busy, rows: ownedRows(items, written) };
}
