import { wakeLocal, type Sql } from '../db/db.js';
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
  /** Merged into the record's metadata (top-level keys replaced). */
  metadata?: Record<string, unknown>;
}

export async function updateState(tx: Sql, id: string, change: StateChange, now: Date): Promise<OwnedTransaction> {
  const [row] = await tx.query<OwnedTransaction>(
    `WITH t AS (
       UPDATE transactions SET
         status = COALESCE($2, status),
         payment_status = COALESCE($3, payment_status),
         stage = COALESCE($4, stage),
         completed_at = COALESCE($5, completed_at),
         metadata = metadata || $6::jsonb,
         updated_at = $7
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

/** Amount returned so far of an outbound payment (its `payout_return` records). */
export async function returnedTotal(sql: Sql, originalId: string): Promise<number> {
  const [row] = await sql.query<{ total: number }>(
    `SELECT COALESCE(sum(amount), 0)::bigint AS total FROM transactions WHERE original_id = $1 AND kind = 'payout_return'`,
    [originalId],
  );
  return row!.total;
}

/**
 * Claims outbound records left at stage 1 (accepted here, never acknowledged by the rail) since
 * before `staleBefore`, bumping `updated_at` so another process does not take them too.
 */
/** The oldest `updated_at` of an order claimUnsent would take once stale (null: none). */
export async function oldestUnsent(sql: Sql): Promise<Date | null> {
  const [row] = await sql.query<{ at: Date | null }>(
    `SELECT min(updated_at) AS at FROM transactions WHERE stage = 1 AND kind IN ('cash_out', 'refund', 'med_refund')`,
  );
  return row?.at ?? null;
}

export async function claimUnsent(sql: Sql, staleBefore: Date, now: Date, limit: number): Promise<OwnedTransaction[]> {
  return sql.query<OwnedTransaction>(
    `WITH c AS (
       UPDATE transactions SET updated_at = $2
        WHERE id IN (SELECT id FROM transactions
                      WHERE stage = 1 AND updated_at < $1 AND kind IN ('cash_out', 'refund', 'med_refund')
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

/** What step 1 of a batch of cash-outs of one account reads, under the account lock. */
export interface CashOutLockState {
  books: { book: string; balance: number }[];
  /**
   * True when a transaction committed a change to the account's books between this statement's
   * snapshot and the moment it got the lock: the other figures read with it may be older than the
   * lock, so the caller reads again (now holding the lock, nothing can change).
   */
  stale: boolean;
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
 * One statement: locks the books of the account (FOR UPDATE, in id order, as lockAccounts) and
 * reads with them its holder and limits, its usage in `windows` and which of `externalIds` it
 * already has. A locked row is read as of the lock (PostgreSQL re-reads it after waiting); the
 * other rows as of the statement's snapshot, which can be older when the lock was waited for —
 * `stale` tells (a row version of the books newer than the snapshot's), and the caller reads
 * again: every change to usage or external_ids happens under this lock together with a change of
 * the books.
 */
export async function lockForCashOut(tx: Sql, accountId: number, windows: readonly UsageWindow[], externalIds: readonly string[]): Promise<CashOutLockState> {
  const [row] = await tx.query<CashOutLockState>(
    `WITH locked AS MATERIALIZED (
       SELECT id, book, balance, xmin::text AS version FROM ledger_accounts WHERE account_id = $1 ORDER BY id FOR UPDATE)
     SELECT (SELECT json_agg(json_build_object('book', l.book, 'balance', l.balance)) FROM locked l) AS books,
            EXISTS (SELECT 1 FROM locked l JOIN ledger_accounts s ON s.id = l.id WHERE s.xmin::text <> l.version) AS stale,
            a.cash_out_fee_cents, a.cash_out_max_amount_cents, a.cash_out_daily_limit_cents, a.cash_out_nighttime_limit_cents,
            m.name AS holder_name, m.document AS holder_document,
            (SELECT json_object_agg(u.window_kind, u.amount) FROM cash_out_usage u
               JOIN unnest($2::text[], $3::timestamptz[]) AS w(kind, start) ON u.window_kind = w.kind AND u.window_start = w.start
              WHERE u.account_id = $1) AS usage,
            (SELECT json_object_agg(t.external_id, t.id) FROM transactions t WHERE t.account_id = $1 AND t.external_id = ANY($4::text[])) AS existing
       FROM accounts a JOIN merchants m ON m.id = a.merchant_id WHERE a.id = $1`,
    [accountId, windows.map((w) => w.kind), windows.map((w) => w.start), externalIds],
  );
  if (!row) throw new Error(`account ${accountId} not found`);
  return row;
}

/** A cash-out record to create in step 1 (stage 1, payment_status processing). */
export interface NewCashOut {
  id: string;
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
  metadata: Record<string, unknown>;
  created_at: Date;
  /** The Idempotency-Key claim to bind to the record (id, owner token), if any. */
  claim: { id: number; token: string } | null;
}

/**
 * One statement for the writes of step 1 of a batch of accepted cash-outs of one account (its
 * books locked by `lockForCashOut`): the usage windows counted (their sum), the records, one
 * ledger transaction available -> pending (amount + fee) per record, and each Idempotency-Key
 * bound to its record. Returns the records and the claim ids bound; the caller checks that every
 * claim was bound (else it rolls back: the key was lost).
 */
export async function insertCashOuts(
  tx: Sql,
  accountId: number,
  merchantId: number,
  items: readonly NewCashOut[],
  windows: readonly UsageWindow[],
): Promise<{ rows: OwnedTransaction[]; bound: Set<number> }> {
  const total = items.reduce((sum, i) => sum + i.amount, 0);
  const json = JSON.stringify(
    items.map((i, n) => ({ ...i, n, claim_id: i.claim?.id ?? null, claim_token: i.claim?.token ?? null, claim: undefined })),
  );
  const rows = await tx.query<TransactionRow & { bound: number[] | null }>(
    `WITH items AS MATERIALIZED (
       SELECT * FROM jsonb_to_recordset($1::jsonb) AS x(
         n int, id uuid, transaction_id text, end_to_end_id text, external_id text, amount bigint, fee_amount bigint,
         description text, counterparty_name text, recipient_key text, recipient_key_type text, recipient_document text,
         recipient_ispb text, request_fingerprint text, metadata jsonb, created_at timestamptz, claim_id bigint, claim_token uuid)),
     usage AS (
       INSERT INTO cash_out_usage (account_id, window_kind, window_start, amount)
       SELECT $2, w.kind, w.start, $5::bigint FROM unnest($3::text[], $4::timestamptz[]) AS w(kind, start)
       ON CONFLICT (account_id, window_kind, window_start) DO UPDATE SET amount = cash_out_usage.amount + EXCLUDED.amount
       RETURNING 1),
     records AS (
       INSERT INTO transactions (id, transaction_id, account_id, kind, type, direction, status, payment_status, stage,
         end_to_end_id, external_id, amount, fee_amount, description, counterparty_name, recipient_key, recipient_key_type,
         recipient_document, recipient_ispb, request_fingerprint, metadata, created_at)
       SELECT id, transaction_id, $2, 'cash_out', 'pix', 'outbound', 2, 'processing', 1,
         end_to_end_id, external_id, amount, fee_amount, description, counterparty_name, recipient_key, recipient_key_type,
         recipient_document, recipient_ispb, request_fingerprint, metadata, created_at
         FROM items ORDER BY n
       RETURNING *),
     lt AS (
       INSERT INTO ledger_transactions (kind, reference)
       SELECT 'cash_out_reserve', transaction_id FROM items ORDER BY n RETURNING id, reference),
     entries AS (
       INSERT INTO ledger_entries (ledger_transaction_id, ledger_account_id, amount)
       SELECT lt.id, la.id, CASE WHEN la.book = 'available' THEN -(i.amount + i.fee_amount) ELSE i.amount + i.fee_amount END
         FROM lt JOIN items i ON i.transaction_id = lt.reference
         JOIN ledger_accounts la ON la.account_id = $2 AND la.book IN ('available', 'pending')
        ORDER BY i.n, la.book = 'pending'
       RETURNING 1),
     bound AS (
       UPDATE idempotency_keys k SET resource_id = i.id::text FROM items i
        WHERE k.id = i.claim_id AND k.owner_token = i.claim_token AND k.status = 'in_progress' AND k.resource_id IS NULL
       RETURNING k.id)
     SELECT r.*, (SELECT array_agg(id) FROM bound) AS bound, (SELECT count(*) FROM entries)::int AS entry_count
       FROM records r`,
    [json, accountId, windows.map((w) => w.kind), windows.map((w) => w.start), total],
  );
  if (rows.length !== items.length || (rows[0] as unknown as { entry_count: number }).entry_count !== 2 * items.length) {
    throw new Error(`cash-out batch of account ${accountId}: ${rows.length} records written for ${items.length}`);
  }
  const bound = new Set((rows[0]!.bound ?? []).map(Number));
  return {
    bound,
    rows: rows.map(({ bound: _b, entry_count: _e, ...row }: TransactionRow & { bound: unknown; entry_count?: unknown }) => ({ ...row, merchant_id: merchantId })),
  };
}

/**
 * Step 3 of a cash-out the rail took, in one statement: the record moves from stage 1 to stage 2
 * (`processing` or `queued`) unless something moved it first or `answer`'s claim is no longer
 * held, the event is written to the outbox, and the Idempotency-Key's answer recorded — each only
 * if the record moved. Returns the record after the move (undefined: nothing moved) and whether
 * the answer was recorded.
 */
export async function markSentWithEvent(
  tx: Sql,
  row: OwnedTransaction,
  paymentStatus: 'processing' | 'queued',
  now: Date,
  event: { event: string; body: Record<string, unknown> },
  answer: { id: number; token: string; statusCode: number; body: string } | null,
): Promise<{ row: OwnedTransaction; recorded: boolean } | undefined> {
  const [moved] = await tx.query<TransactionRow & { recorded: number }>(
    `WITH t AS (
       UPDATE transactions SET stage = 2, payment_status = $2, updated_at = $3
        WHERE id = $1 AND stage = 1
          AND ($7::bigint IS NULL OR EXISTS (
                SELECT 1 FROM idempotency_keys WHERE id = $7 AND owner_token = $8 AND status = 'in_progress'))
       RETURNING *),
     ev AS (
       INSERT INTO outbox_events (event, merchant_id, account_id, subject, payload)
       SELECT $4, $5, t.account_id, t.transaction_id, $6::jsonb FROM t RETURNING 1),
     k AS (
       UPDATE idempotency_keys SET status = 'completed', response_status = $9, response_body = $10
        WHERE id = $7 AND owner_token = $8 AND status = 'in_progress' AND EXISTS (SELECT 1 FROM t) RETURNING 1)
     SELECT t.*, (SELECT count(*) FROM k)::int + 0 * (SELECT count(*) FROM ev) AS recorded FROM t`,
    [row.id, paymentStatus, now, event.event, row.merchant_id, JSON.stringify(event.body), answer?.id ?? null, answer?.token ?? null, answer?.statusCode ?? null, answer?.body ?? null],
  );
  if (!moved) return undefined;
  wakeLocal(tx, 'outbox'); // as emitEvent does: the webhook dispatcher looks once this committed
  const { recorded, ...rest } = moved;
  return { row: { ...rest, merchant_id: row.merchant_id }, recorded: recorded === 1 };
}

/** A record by end-to-end id, locked (FOR UPDATE, read as of the lock). */
export async function lockByEndToEndId(tx: Sql, endToEndId: string): Promise<OwnedTransaction | undefined> {
  const [row] = await tx.query<OwnedTransaction>(`${OWNED} WHERE t.end_to_end_id = $1 FOR UPDATE OF t`, [endToEndId]);
  return row;
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

/**
 * The settlement of a cash-out (its books and record locked) in one statement: the ledger
 * transaction pending -> central bank (+ fees), the record settled (stage 3) and its event.
 */
export async function settleCashOut(
  tx: Sql,
  row: OwnedTransaction,
  settledAt: Date,
  now: Date,
  event: { event: string; body: Record<string, unknown> },
): Promise<OwnedTransaction> {
  const codes = [`account:${row.account_id}:pending`, 'institution:central_bank'];
  const amounts = [-(row.amount + row.fee_amount), row.amount];
  if (row.fee_amount > 0) {
    codes.push('institution:fees');
    amounts.push(row.fee_amount);
  }
  const [settled] = await tx.query<TransactionRow & { entry_count: number }>(
    `WITH lt AS (
       INSERT INTO ledger_transactions (kind, reference) VALUES ('cash_out_settle', $2) RETURNING id),
     entries AS (
       INSERT INTO ledger_entries (ledger_transaction_id, ledger_account_id, amount)
       SELECT lt.id, la.id, v.amount FROM lt
        CROSS JOIN unnest($3::text[], $4::bigint[]) WITH ORDINALITY AS v(code, amount, n)
         JOIN ledger_accounts la ON la.code = v.code ORDER BY v.n
       RETURNING 1),
     t AS (
       UPDATE transactions SET status = 1, payment_status = 'settled', stage = 3, completed_at = $5, updated_at = $6
        WHERE id = $1 RETURNING *),
     ev AS (
       INSERT INTO outbox_events (event, merchant_id, account_id, subject, payload)
       SELECT $7, $8, t.account_id, t.transaction_id, $9::jsonb FROM t RETURNING 1)
     SELECT t.*, (SELECT count(*) FROM entries)::int + 0 * (SELECT count(*) FROM ev)::int AS entry_count FROM t`,
    [row.id, row.transaction_id, codes, amounts, settledAt, now, event.event, row.merchant_id, JSON.stringify(event.body)],
  );
  if (!settled || settled.entry_count !== codes.length) throw new Error(`settlement of ${row.transaction_id} wrote ${settled?.entry_count ?? 0} entries`);
  wakeLocal(tx, 'outbox'); // as emitEvent does
  const { entry_count: _n, ...rest } = settled;
  return { ...rest, merchant_id: row.merchant_id };
}
