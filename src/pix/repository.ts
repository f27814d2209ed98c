import { LOCK_NOT_AVAILABLE, sqlState, wakeLocal, type Sql } from '../db/db.js';
import type { AccountRow } from '../merchants/repository.js';
import type { TransactionRow } from '../transactions/repository.js';

/**
 * SQL of the PIX money movements (cash-out, refund, inbound, returns) on top of the statement
 * records of `transactions`, plus the rail inbox and the cash-out limit windows.
 */

/** A statement record with the merchant that owns its account. */
export type OwnedTransaction = TransactionRow & { merchant_id: number };

const OWNED = `SELECT t.*, a.merchant_id FROM transactions t JOIN accounts a ON a.id = t.account_id`;

export async function findByExternalId(sql: Sql, accountId: number, externalId: string): Promise<OwnedTransaction | undefined> {
  const [row] = await sql.query<OwnedTransaction>(`${OWNED} WHERE t.account_id = $1 AND t.external_id = $2`, [accountId, externalId]);
  return row;
}

export async function findByEndToEndId(sql: Sql, endToEndId: string): Promise<OwnedTransaction | undefined> {
  const [row] = await sql.query<OwnedTransaction>(`${OWNED} WHERE t.end_to_end_id = $1`, [endToEndId]);
  return row;
}

export async function findById(sql: Sql, id: string): Promise<OwnedTransaction | undefined> {
  const [row] = await sql.query<OwnedTransaction>(`${OWNED} WHERE t.id = $1`, [id]);
  return row;
}

/**
 * A record of the merchant's accounts by any of its ids: internal UUID, transaction_id or
 * end-to-end id (refund rule 1: another merchant's record is not found).
 */
export async function findForMerchant(sql: Sql, merchantId: number, anyId: string): Promise<OwnedTransaction | undefined> {
  const column = UUID.test(anyId) ? 't.id' : /^[ED]\d{8}/.test(anyId) ? 't.end_to_end_id' : 't.transaction_id';
  const [row] = await sql.query<OwnedTransaction>(
    `${OWNED} WHERE ${column} = $1 AND a.merchant_id = $2`,
    [column === 't.id' ? anyId.toLowerCase() : anyId, merchantId],
  );
  return row;
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** Locks a record for a state change. Callers lock the account's books first (fixed lock order). */
export async function lockTransaction(tx: Sql, id: string): Promise<OwnedTransaction> {
  const [row] = await tx.query<OwnedTransaction>(`${OWNED} WHERE t.id = $1 FOR UPDATE OF t`, [id]);
  if (!row) throw new Error(`transaction ${id} disappeared`);
  return row;
}

export interface StateChange {
  status?: number;
  payment_status?: string;
  stage?: number;
  completed_at?: Date;
  /** What the receiver returned of a cash-out so far (base units). */
  returned_amount?: number;
  /** Typed state (migration 0850): left as it is when undefined; `reason_code` null clears the reason. */
  resumable?: boolean;
  held_at?: Date;
  reason_code?: string | null;
  reason?: string | null;
  /** The limit windows a cash-out's new reservation counted in (replacing the earlier ones). */
  limit_windows?: readonly UsageWindow[];
  /** Merged into the record's metadata (top-level keys replaced). */
  metadata?: Record<string, unknown>;
}

/** The limit windows of a cash-out as its columns hold them (day, night). */
export function windowColumns(windows: readonly UsageWindow[]): { limit_day_start: Date | null; limit_night_start: Date | null } {
  return {
    limit_day_start: windows.find((w) => w.kind === 'day')?.start ?? null,
    limit_night_start: windows.find((w) => w.kind === 'night')?.start ?? null,
  };
}

/** The limit windows a cash-out's reservation counted in, from its columns. */
export function windowsOf(row: Pick<OwnedTransaction, 'limit_day_start' | 'limit_night_start'>): UsageWindow[] {
  const windows: UsageWindow[] = [];
  if (row.limit_day_start) windows.push({ kind: 'day', start: row.limit_day_start });
  if (row.limit_night_start) windows.push({ kind: 'night', start: row.limit_night_start });
  return windows;
}

export async function updateState(tx: Sql, id: string, change: StateChange, now: Date): Promise<OwnedTransaction> {
  const windows = change.limit_windows ? windowColumns(change.limit_windows) : null;
  const [row] = await tx.query<OwnedTransaction>(
    `WITH t AS (
       UPDATE transactions SET
         status = COALESCE($2, status),
         payment_status = COALESCE($3, payment_status),
         stage = COALESCE($4, stage),
         completed_at = COALESCE($5, completed_at),
         metadata = metadata || $6::jsonb,
         updated_at = $7,
         returned_amount = COALESCE($8, returned_amount),
         resumable = COALESCE($9, resumable),
         held_at = COALESCE($10, held_at),
         reason_code = CASE WHEN $11 THEN $12 ELSE reason_code END,
         reason = CASE WHEN $11 THEN $13 ELSE reason END,
         limit_day_start = CASE WHEN $14 THEN $15 ELSE limit_day_start END,
         limit_night_start = CASE WHEN $14 THEN $16 ELSE limit_night_start END
       WHERE id = $1 RETURNING *)
     SELECT t.*, a.merchant_id FROM t JOIN accounts a ON a.id = t.account_id`,
    [
      id,
      change.status ?? null,
      change.payment_status ?? null,
      change.stage ?? null,
      change.completed_at ?? null,
      JSON.stringify(change.metadata ?? {}),
      now,
      change.returned_amount ?? null,
      change.resumable ?? null,
      change.held_at ?? null,
      change.reason_code !== undefined,
      change.reason_code ?? null,
      change.reason ?? null,
      windows !== null,
      windows?.limit_day_start ?? null,
      windows?.limit_night_start ?? null,
    ],
  );
  return row!;
}

/**
 * Moves a record from stage 1 (accepted here) to stage 2 (acknowledged by the rail) unless
 * something else moved it first; returns the record if this call made the move.
 */
export async function markSent(tx: Sql, id: string, paymentStatus: 'processing' | 'queued', now: Date): Promise<OwnedTransaction | undefined> {
  const [row] = await tx.query<OwnedTransaction>(
    `WITH t AS (
       UPDATE transactions SET stage = 2, payment_status = $2, updated_at = $3
        WHERE id = $1 AND stage = 1 RETURNING *)
     SELECT t.*, a.merchant_id FROM t JOIN accounts a ON a.id = t.account_id`,
    [id, paymentStatus, now],
  );
  return row;
}

/**
 * Refunds of an original, voluntary and MED ones alike: `open` counts accepted and settled ones
 * (rule 2), `executed` settled only (rule 6).
 */
export async function refundTotals(sql: Sql, originalId: string): Promise<{ open: number; executed: number }> {
  const [row] = await sql.query<{ open: number; executed: number }>(
    `SELECT COALESCE(sum(amount) FILTER (WHERE status IN (1, 2)), 0)::bigint AS open,
            COALESCE(sum(amount) FILTER (WHERE status = 1), 0)::bigint AS executed
       FROM transactions WHERE original_id = $1 AND kind IN ('refund', 'med_refund')`,
    [originalId],
  );
  return row!;
}

/**
 * The oldest `updated_at` of an order claimUnsent would take once stale (null: none). Records at
 * stage 1 are found among those in flight (transactions_in_flight_idx, migration 0680: no index
 * reads `stage` or `updated_at`, so the acknowledgement updates a record in place).
 */
export async function oldestUnsent(sql: Sql): Promise<Date | null> {
  const [row] = await sql.query<{ at: Date | null }>(
    `SELECT min(updated_at) AS at FROM transactions
      WHERE statement_status = 'in_flight' AND stage = 1 AND kind IN ('cash_out', 'refund', 'med_refund')`,
  );
  return row?.at ?? null;
}

/**
 * Claims outbound records left at stage 1 (accepted here, never acknowledged by the rail) since
 * before `staleBefore`, bumping `updated_at` so another process does not take them too. A record
 * whose `updated_at` lies more than a minute past `now` was stamped before the wall clock stepped
 * back: it is claimed too, rather than waiting out the step.
 */
export async function claimUnsent(sql: Sql, staleBefore: Date, now: Date, limit: number): Promise<OwnedTransaction[]> {
  return sql.query<OwnedTransaction>(
    `WITH c AS (
       UPDATE transactions SET updated_at = $2
        WHERE id IN (SELECT id FROM transactions
                      WHERE statement_status = 'in_flight' AND stage = 1
                        AND (updated_at < $1 OR updated_at > $2::timestamptz + interval '1 minute')
                        AND kind IN ('cash_out', 'refund', 'med_refund')
                      ORDER BY updated_at LIMIT $3 FOR UPDATE SKIP LOCKED)
        RETURNING *)
     SELECT c.*, a.merchant_id FROM c JOIN accounts a ON a.id = c.account_id`,
    [staleBefore, now, limit],
  );
}

/** Records a rail notification as applied; false when it already was (a redelivery). */
export async function recordNotification(tx: Sql, notificationId: string, kind: string): Promise<boolean> {
  const rows = await tx.query(
    'INSERT INTO rail_inbox (notification_id, kind) VALUES ($1, $2) ON CONFLICT (notification_id) DO NOTHING RETURNING notification_id',
    [notificationId, kind],
  );
  return rows.length === 1;
}

// ---- cash-out limit windows ----

export interface UsageWindow {
  kind: 'day' | 'night';
  start: Date;
}

/**
 * Adds (or, negative, takes back) an amount in each window and returns each window's total after
 * the change, by window kind. Runs under the account lock.
 */
export async function addUsage(tx: Sql, accountId: number, windows: readonly UsageWindow[], amount: number): Promise<Map<string, number>> {
  if (windows.length === 0) return new Map();
  const rows = await tx.query<{ window_kind: string; amount: number }>(
    `INSERT INTO cash_out_usage (account_id, window_kind, window_start, amount)
     SELECT $1, w.kind, w.start, GREATEST($4::bigint, 0) FROM unnest($2::text[], $3::timestamptz[]) AS w(kind, start)
     ON CONFLICT (account_id, window_kind, window_start)
     DO UPDATE SET amount = GREATEST(cash_out_usage.amount + $4::bigint, 0)
     RETURNING window_kind, amount`,
    [accountId, windows.map((w) => w.kind), windows.map((w) => w.start), amount],
  );
  return new Map(rows.map((r) => [r.window_kind, r.amount]));
}

/**
 * What the account has sent so far in each window, by window kind (absent: nothing). Under the
 * account lock, taken by an earlier statement of the transaction, so it reads every committed
 * change: check the limits on it, then `addUsage` (the database refuses a usage above the limit:
 * migration 0700).
 */
export async function usageIn(tx: Sql, accountId: number, windows: readonly UsageWindow[]): Promise<Map<string, number>> {
  if (windows.length === 0) return new Map();
  const rows = await tx.query<{ window_kind: string; amount: number }>(
    `SELECT u.window_kind, u.amount FROM cash_out_usage u JOIN unnest($2::text[], $3::timestamptz[]) AS w(kind, start)
        ON u.window_kind = w.kind AND u.window_start = w.start
      WHERE u.account_id = $1`,
    [accountId, ...windowParams(windows)],
  );
  return new Map(rows.map((r) => [r.window_kind, r.amount]));
}

/** An account with its holder's name and document (the payer of its cash-outs). */
export type AccountWithHolder = AccountRow & { holder_name: string; holder_document: string };

export async function accountWithHolder(sql: Sql, accountId: number): Promise<AccountWithHolder> {
  const [row] = await sql.query<AccountWithHolder>(
    `SELECT a.*, m.name AS holder_name, m.document AS holder_document FROM accounts a JOIN merchants m ON m.id = a.merchant_id WHERE a.id = $1`,
    [accountId],
  );
  if (!row) throw new Error(`account ${accountId} not found`);
  return row;
}

// ---- cash-out in few round trips (issue 12) ----

/** What step 1 of a batch of cash-outs reads of one of its accounts, under the account lock. */
export interface CashOutLockState {
  account_id: number;
  merchant_id: number;
  books: { book: string; balance: number }[];
  cash_out_fee_cents: number;
  cash_out_max_amount_cents: number;
  cash_out_daily_limit_cents: number;
  cash_out_nighttime_limit_cents: number;
  holder_name: string;
  holder_document: string;
  /** Sent so far in each window asked for, by window kind. */
  usage: Record<string, number> | null;
  /** Records of the account with one of the external_ids asked for: external_id -> record id. */
  existing: Record<string, string> | null;
}

/**
 * What step 1 reads of its accounts: the books locked (`lock`: waiting for them, or `skip`: only
 * those free now, SKIP LOCKED) or as of one snapshot.
 */
function cashOutStateSql(lock: 'wait' | 'skip' | false): string {
  return `WITH locked AS MATERIALIZED (
       SELECT id, account_id, book, balance, xmin::text AS version FROM ledger_accounts
        WHERE account_id = ANY($1::bigint[]) ORDER BY id${lock === 'wait' ? ' FOR UPDATE' : lock === 'skip' ? ' FOR UPDATE SKIP LOCKED' : ''})${
          lock ? ',\n     stale AS (SELECT EXISTS (SELECT 1 FROM locked l JOIN ledger_accounts s ON s.id = l.id WHERE s.xmin::text <> l.version) AS stale)' : ''
        }
     SELECT a.id::int AS account_id, a.merchant_id::int AS merchant_id,
            (SELECT json_agg(json_build_object('book', l.book, 'balance', l.balance)) FROM locked l WHERE l.account_id = a.id) AS books,
            ${lock ? '(SELECT stale FROM stale)' : 'false'} AS stale,
            ${
              lock === 'skip'
                ? '(SELECT count(*) FROM locked l WHERE l.account_id = a.id) < (SELECT count(*) FROM ledger_accounts s WHERE s.account_id = a.id)'
                : 'false'
            } AS busy,
            a.cash_out_fee_cents, a.cash_out_max_amount_cents, a.cash_out_daily_limit_cents, a.cash_out_nighttime_limit_cents,
            m.name AS holder_name, m.document AS holder_document,
            (SELECT json_object_agg(u.window_kind, u.amount) FROM cash_out_usage u
               JOIN unnest($2::text[], $3::timestamptz[]) AS w(kind, start) ON u.window_kind = w.kind AND u.window_start = w.start
              WHERE u.account_id = a.id) AS usage,
            -- One probe of the unique (account_id, external_id) index per external_id of the
            -- account (LIMIT 1: a nested loop, whatever the statistics of a young table say).
            (SELECT json_object_agg(e.external_id, t.id) FROM unnest($4::bigint[], $5::text[]) AS e(account_id, external_id)
               CROSS JOIN LATERAL (SELECT t.id FROM transactions t WHERE t.account_id = e.account_id AND t.external_id = e.external_id LIMIT 1) t
              WHERE e.account_id = a.id) AS existing
       FROM accounts a JOIN merchants m ON m.id = a.merchant_id WHERE a.id = ANY($1::bigint[])`;
}
const LOCK_FOR_CASH_OUTS = cashOutStateSql('wait');
const LOCK_FREE_FOR_CASH_OUTS = cashOutStateSql('skip');
const READ_FOR_CASH_OUTS = cashOutStateSql(false);

/** The limit windows as the reads of step 1 take them (`$2` kinds, `$3` starts). */
function windowParams(windows: readonly UsageWindow[]): [string[], Date[]] {
  return [windows.map((w) => w.kind), windows.map((w) => w.start)];
}

/** An external_id a batch names, with the account it must be unique in. */
export interface ExternalIdRef {
  accountId: number;
  externalId: string;
}

async function cashOutStates(
  sql: Sql,
  text: string,
  accountIds: readonly number[],
  windows: readonly UsageWindow[],
  externalIds: readonly ExternalIdRef[],
): Promise<{ stale: boolean; accounts: Map<number, CashOutLockState>; busy: Set<number> }> {
  const rows = await sql.query<CashOutLockState & { stale: boolean; busy: boolean }>(text, [
    accountIds,
    ...windowParams(windows),
    externalIds.map((e) => e.accountId),
    externalIds.map((e) => e.externalId),
  ]);
  const accounts = new Map<number, CashOutLockState>();
  const busy = new Set<number>();
  for (const { stale: _s, busy: b, ...row } of rows) {
    if (b) busy.add(Number(row.account_id));
    else accounts.set(Number(row.account_id), row);
  }
  for (const id of accountIds) if (!accounts.has(id) && !busy.has(id)) throw new Error(`account ${id} not found`);
  return { stale: rows.some((r) => r.stale), accounts, busy };
}

/**
 * One statement: locks the books of the accounts (FOR UPDATE, in ledger account id order, as
 * lockAccounts — the lock order of every money movement, so batches of several accounts never
 * deadlock each other or a TEF) and reads with them each account's holder and limits, its usage in
 * `windows` and which of `externalIds` it already has. A locked row is read as of the lock
 * (PostgreSQL re-reads it after waiting); the other rows as of the statement's snapshot, which can
 * be older when a lock was waited for — `stale` tells (a row version of the books newer than the
 * snapshot's), and the caller reads again: every change to usage or external_ids happens under
 * these locks together with a change of the books.
 */
export function lockForCashOuts(tx: Sql, accountIds: readonly number[], windows: readonly UsageWindow[], externalIds: readonly ExternalIdRef[]) {
  return cashOutStates(tx, LOCK_FOR_CASH_OUTS, accountIds, windows, externalIds);
}

/**
 * `lockForCashOuts` without waiting (SKIP LOCKED): the accounts with a book locked by another
 * transaction are `busy` (not in `accounts`; the books of theirs it did lock stay locked until the
 * transaction ends), so one account held elsewhere never holds up the others (issue 24).
 */
export function lockFreeForCashOuts(tx: Sql, accountIds: readonly number[], windows: readonly UsageWindow[], externalIds: readonly ExternalIdRef[]) {
  return cashOutStates(tx, LOCK_FREE_FOR_CASH_OUTS, accountIds, windows, externalIds);
}

/** What `lockForCashOuts` reads, without locking: one consistent snapshot (`stale` is false). */
export function readForCashOuts(sql: Sql, accountIds: readonly number[], windows: readonly UsageWindow[], externalIds: readonly ExternalIdRef[]) {
  return cashOutStates(sql, READ_FOR_CASH_OUTS, accountIds, windows, externalIds);
}

/** A cash-out record to create in step 1 (stage 1, payment_status processing). */
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
         recipient_ispb text, request_fingerprint text, payer_name text, payer_document text, metadata jsonb, created_at timestamptz, claim_id bigint, claim_token uuid))`;

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
         recipient_document, recipient_ispb, request_fingerprint, payer_name, payer_document, limit_day_start, limit_night_start,
         metadata, created_at)
       SELECT id, transaction_id, account_id, 'cash_out', 'pix', 'outbound', 2, 'processing', 1,
         end_to_end_id, external_id, amount, fee_amount, description, counterparty_name, recipient_key, recipient_key_type,
         recipient_document, recipient_ispb, request_fingerprint, payer_name, payer_document,
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

/** Step 3 of one cash-out the rail took (see `markSentWithEvents`). */
export interface SentMark {
  row: OwnedTransaction;
  paymentStatus: 'processing' | 'queued';
  now: Date;
  event: { event: string; body: Record<string, unknown> };
  /** The Idempotency-Key's answer, recorded only while its claim is still held. */
  answer: { id: number; token: string; statusCode: number; body: string } | null;
}

/**
 * Step 3 of cash-outs the rail took, in one statement for many (atomic on its own, no
 * BEGIN/COMMIT): each record moves from stage 1 to stage 2 (`processing` or `queued`) unless
 * something moved it first or its answer's claim is no longer held, its event is written to the
 * outbox, and its Idempotency-Key's answer recorded — each only if that record moved. Returns, per
 * mark in order, whether the record moved (undefined: nothing moved) and whether the answer was
 * recorded; the caller knows the record after the move (its own, at stage 2), so no row is read
 * back. A record marked twice in one call moves once (for the first mark).
 */
export async function markSentWithEvents(sql: Sql, marks: readonly SentMark[]): Promise<({ recorded: boolean } | undefined)[]> {
  const json = JSON.stringify(
    marks.map((m, n) => ({
      n,
      id: m.row.id,
      payment_status: m.paymentStatus,
      updated_at: m.now,
      event: m.event.event,
      merchant_id: m.row.merchant_id,
      payload: m.event.body,
      claim_id: m.answer?.id ?? null,
      claim_token: m.answer?.token ?? null,
      response_status: m.answer?.statusCode ?? null,
      response_body: m.answer?.body ?? null,
    })),
  );
  const moved = await sql.query<{ n: number; recorded: boolean }>(
    `WITH items AS MATERIALIZED (
       SELECT DISTINCT ON (id) * FROM jsonb_to_recordset($1::jsonb) AS x(
         n int, id uuid, payment_status text, updated_at timestamptz, event text, merchant_id bigint, payload jsonb,
         claim_id bigint, claim_token uuid, response_status int, response_body text)
        ORDER BY id, n),
     t AS (
       UPDATE transactions tr SET stage = 2, payment_status = i.payment_status, updated_at = i.updated_at
         FROM items i
        -- The records are found by their primary key, one probe each (id = ANY of the batch's
        -- ids): joined on tr.id = i.id alone, the planner estimated "stage < 2" at a row or two
        -- and scanned the whole table for every batch. stage < 2 is stage = 1 (stages are 1 to 3).
        -- The update changes no indexed column, so it is heap-only when the page has room
        -- (migration 0680).
        WHERE tr.id = ANY (ARRAY(SELECT id FROM items)) AND tr.id = i.id AND tr.stage < 2
          -- The claim still held: a scalar subquery, one probe of the primary key per record (an
          -- EXISTS could be run as a hashed subplan, a scan of every key of the day per batch).
          AND (i.claim_id IS NULL OR (
                SELECT k.status FROM idempotency_keys k WHERE k.id = i.claim_id AND k.owner_token = i.claim_token) = 'in_progress')
       RETURNING tr.account_id, tr.transaction_id, i.n),
     ev AS (
       INSERT INTO outbox_events (event, merchant_id, account_id, subject, payload)
       SELECT i.event, i.merchant_id, t.account_id, t.transaction_id, i.payload FROM t JOIN items i ON i.n = t.n ORDER BY t.n RETURNING 1),
     k AS (
       UPDATE idempotency_keys k SET status = 'completed', response_status = i.response_status, response_body = i.response_body
         FROM t JOIN items i ON i.n = t.n
        WHERE k.id = i.claim_id AND k.owner_token = i.claim_token AND k.status = 'in_progress' RETURNING k.id)
     SELECT t.n, EXISTS (SELECT 1 FROM k JOIN items i ON i.claim_id = k.id WHERE i.n = t.n) AS recorded FROM t`,
    [json],
  );
  if (moved.length > 0) wakeLocal(sql, 'outbox'); // as emitEvent does: the webhook dispatcher looks once this committed
  // (A data-modifying CTE runs to completion whether or not the query reads it: `ev` is written.)
  const byMark = new Map(moved.map(({ n, recorded }) => [n, { recorded }]));
  return marks.map((_, n) => byMark.get(n));
}

/**
 * A record by end-to-end id and, when it is a cash-out, its account's books locked (FOR UPDATE,
 * in id order) in the same statement — the lock order of every money movement: books first, then
 * the record (`lockTransaction`, which reads it as of its own lock).
 */
export async function findByEndToEndIdLockingCashOutAccount(tx: Sql, endToEndId: string): Promise<OwnedTransaction | undefined> {
  const [row] = await tx.query<OwnedTransaction & { locked_books: number }>(
    `SELECT t.*, a.merchant_id,
            (SELECT count(*) FROM (SELECT 1 FROM ledger_accounts la
                                     WHERE la.account_id = t.account_id AND t.kind = 'cash_out' ORDER BY la.id FOR UPDATE) l)::int AS locked_books
       FROM transactions t JOIN accounts a ON a.id = t.account_id WHERE t.end_to_end_id = $1`,
    [endToEndId],
  );
  if (!row) return undefined;
  const { locked_books: _locked, ...rest } = row;
  return rest;
}

// ---- settlements of a delivery batch in one statement (issue 12) ----

/**
 * The cash-outs with these end-to-end ids, as of a read without locks: what their settlement's
 * events say (`payoutBody` reads only what a cash-out never changes). `settleCashOuts` locks
 * them and takes their stage as of its lock.
 */
export async function readCashOutsForSettlement(sql: Sql, endToEndIds: readonly string[]): Promise<OwnedTransaction[]> {
  return sql.query<OwnedTransaction>(
    `${OWNED} WHERE t.end_to_end_id = ANY($1::text[]) AND t.kind = 'cash_out'`,
    [endToEndIds],
  );
}

/** A cash-out to settle in `settleCashOuts`, read by `readCashOutsForSettlement`. */
export interface CashOutSettlement {
  /** The rail notification that settles it: applied only if its id is new in rail_inbox. */
  notificationId: string;
  row: OwnedTransaction;
  settledAt: Date;
  /** The outbox body of `pix.payout.processing`, written first if the record is still at stage 1. */
  processing: Record<string, unknown>;
  /** The outbox body of `pix.payout.confirmed`. */
  confirmed: Record<string, unknown>;
}

const SETTLE_CASH_OUTS = `WITH ins AS (
       INSERT INTO rail_inbox (notification_id, kind) SELECT id, 'payment.settled' FROM unnest($1::text[]) AS x(id)
       ON CONFLICT (notification_id) DO NOTHING RETURNING notification_id),
     items AS MATERIALIZED (
       SELECT i.* FROM jsonb_to_recordset($2::jsonb) AS i(n int, notification_id text, id uuid, transaction_id text, account_id bigint,
         merchant_id bigint, amount bigint, fee_amount bigint, settled_at timestamptz, processing jsonb, confirmed jsonb)
        WHERE i.notification_id IN (SELECT notification_id FROM ins)),
     -- The records locked in id order, one probe of the primary key each, each as of its lock.
     locked AS MATERIALIZED (
       SELECT l.id, l.stage FROM (SELECT id FROM items ORDER BY id) i
        CROSS JOIN LATERAL (SELECT r.id, r.stage FROM transactions r WHERE r.id = i.id FOR UPDATE) l),
     -- A record settled meanwhile is left alone; one still at stage 1 announces its acceptance first.
     ok AS MATERIALIZED (
       SELECT i.*, l.stage FROM items i JOIN locked l ON l.id = i.id WHERE l.stage < 3),
     lt AS (
       INSERT INTO ledger_transactions (kind, reference) SELECT 'cash_out_settle', transaction_id FROM ok ORDER BY n RETURNING id, reference),
     entries AS (
       INSERT INTO ledger_entries (ledger_transaction_id, ledger_account_id, amount)
       SELECT lt.id, la.id, v.amount FROM lt JOIN ok i ON i.transaction_id = lt.reference
        CROSS JOIN LATERAL (VALUES (1, 'account:' || i.account_id || ':pending', -(i.amount + i.fee_amount)),
                                   (2, 'institution:central_bank', i.amount), (3, 'institution:fees', i.fee_amount)) AS v(k, code, amount)
         JOIN ledger_accounts la ON la.code = v.code
        WHERE v.amount <> 0 ORDER BY la.id, i.n, v.k
       RETURNING 1),
     t AS (
       UPDATE transactions r SET status = 1, payment_status = 'settled', stage = 3, completed_at = i.settled_at, updated_at = $3
         FROM ok i WHERE r.id = i.id RETURNING r.id),
     ev AS (
       INSERT INTO outbox_events (event, merchant_id, account_id, subject, payload)
       SELECT e.event, i.merchant_id, i.account_id, i.transaction_id, e.payload
         FROM ok i JOIN t ON t.id = i.id
        CROSS JOIN LATERAL (VALUES (1, 'pix.payout.processing', i.processing), (2, 'pix.payout.confirmed', i.confirmed)) AS e(k, event, payload)
        WHERE e.k = 2 OR i.stage = 1
        ORDER BY i.n, e.k
       RETURNING 1),
     -- Selected below so that it runs (a CTE nobody reads is not evaluated); a false one aborts.
     checks AS (
       SELECT statement_assert((SELECT count(*) FROM entries) = (SELECT COALESCE(sum(CASE WHEN fee_amount > 0 THEN 3 ELSE 2 END), 0) FROM ok), 'settlement batch: ledger entries missing')
          AND statement_assert((SELECT count(*) FROM t) = (SELECT count(*) FROM ok), 'settlement batch: records not settled')
          AND statement_assert((SELECT count(*) FROM ev) = (SELECT COALESCE(sum(CASE WHEN stage = 1 THEN 2 ELSE 1 END), 0) FROM ok), 'settlement batch: events missing') AS ok)
     SELECT (SELECT array_agg(notification_id) FROM ins) AS fresh, (SELECT count(*) FROM ok)::int AS settled, (SELECT ok FROM checks) AS asserted`;

/**
 * The settlements of one delivery batch in ONE statement, outside any transaction (one round trip;
 * the locks held only while it runs and commits): every notification id of `notificationIds` into
 * rail_inbox (ON CONFLICT DO NOTHING: a redelivered id does nothing); for each settlement whose
 * notification was new, its record locked (id order) and, if it is not settled yet, the ledger
 * transaction (pending -> central bank + fees), the record settled (stage 3) and its events —
 * `pix.payout.processing` first when the record is still at stage 1 as of its lock (a settlement
 * that overtook the acknowledgement), then `pix.payout.confirmed`. The entries are written in
 * ledger-account id order, so the running balance takes the accounts' pending books last, in the
 * lock order of every money movement (records first, then books: two batches, or a batch and a
 * reserve batch, never deadlock). The statement's invariants are asserted inside it
 * (`statement_assert`): it commits all of them or nothing. Returns the notification ids that were new.
 */
export async function settleCashOuts(sql: Sql, notificationIds: readonly string[], items: readonly CashOutSettlement[], now: Date): Promise<Set<string>> {
  const json = JSON.stringify(
    items.map((s, n) => ({
      n,
      notification_id: s.notificationId,
      id: s.row.id,
      transaction_id: s.row.transaction_id,
      account_id: s.row.account_id,
      merchant_id: s.row.merchant_id,
      amount: s.row.amount,
      fee_amount: s.row.fee_amount,
      settled_at: s.settledAt.toISOString(),
      processing: s.processing,
      confirmed: s.confirmed,
    })),
  );
  const [result] = await sql.query<{ fresh: string[] | null; settled: number; asserted: boolean }>(SETTLE_CASH_OUTS, [notificationIds, json, now]);
  if (result!.settled > 0) wakeLocal(sql, 'outbox'); // as emitEvent does
  return new Set(result!.fresh ?? []);
}
