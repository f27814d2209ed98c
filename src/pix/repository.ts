import type { Sql } from '../db/db.js';
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

export async function purgeInbox(sql: Sql, before: Date, limit = 5000): Promise<number> {
  const rows = await sql.query(
    `DELETE FROM rail_inbox WHERE notification_id IN (
       SELECT notification_id FROM rail_inbox WHERE processed_at < $1 LIMIT $2) RETURNING notification_id`,
    [before, limit],
  );
  return rows.length;
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

export async function purgeUsage(sql: Sql, before: Date): Promise<void> {
  await sql.query('DELETE FROM cash_out_usage WHERE window_start < $1', [before]);
}
