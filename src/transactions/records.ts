import type { Sql } from '../db/db.js';
import { TX_STATUS, type TransactionRow } from './repository.js';

export { TX_STATUS, type TransactionRow };

/**
 * The writer of the statement records (table `transactions`): every record is created, read for a
 * change, locked and moved here — by PIX (cash-out, refund, inbound, charges), TEF and MED alike.
 * The one exception is the cash-out's batched statements (src/pix/store/: reserve, step 3,
 * settlement), which write many records together with their books in one statement.
 */

export type NewTransaction = Pick<TransactionRow, 'transaction_id' | 'account_id' | 'kind' | 'type' | 'direction' | 'status' | 'amount'> &
  Partial<Omit<TransactionRow, 'id' | 'created_at' | 'updated_at' | 'returned_amount' | 'resumable' | 'held_at' | 'limit_day_start' | 'limit_night_start'>> & { created_at?: Date };

const COLUMNS = [
  'transaction_id', 'account_id', 'kind', 'type', 'direction', 'status', 'payment_status', 'stage',
  'end_to_end_id', 'external_id', 'tag', 'amount', 'fee_amount', 'description', 'counterparty_name',
  'recipient_key', 'recipient_key_type', 'recipient_document', 'recipient_ispb', 'payer_document',
  'payer_ispb', 'payer_bank_name', 'original_id', 'request_fingerprint', 'metadata', 'created_at',
  'completed_at', 'payer_name', 'reason_code', 'reason', 'return_code', 'infraction_id',
  'recipient_bank_name', 'charge_unmatched_reason', 'counterpart_account_id', 'pair_id', 'failed_at',
] as const;

export async function insertTransaction(tx: Sql, record: NewTransaction): Promise<TransactionRow> {
  const present = COLUMNS.filter((c) => record[c as keyof NewTransaction] !== undefined);
  const values = present.map((c) => {
    const v = record[c as keyof NewTransaction];
    return c === 'metadata' ? JSON.stringify(v) : v;
  });
  const [row] = await tx.query<TransactionRow>(
    `INSERT INTO transactions (${present.join(', ')})
     VALUES (${present.map((c, i) => (c === 'metadata' ? `$${i + 1}::jsonb` : `$${i + 1}`)).join(', ')})
     RETURNING *`,
    values,
  );
  return row!;
}

/** A statement record with the merchant that owns its account. */
export type OwnedTransaction = TransactionRow & { merchant_id: number };

export const OWNED = `SELECT t.*, a.merchant_id FROM transactions t JOIN accounts a ON a.id = t.account_id`;

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
  limit_windows?: readonly LimitWindow[];
  /** When the rail rejected or failed the record (with a status 3 or 4). */
  failed_at?: Date;
}

/** A cash-out limit window as a record counts in it (src/pix/store/limitWindows.ts `UsageWindow`). */
export interface LimitWindow {
  kind: 'day' | 'night';
  start: Date;
}

/** The limit windows of a cash-out as its columns hold them (day, night). */
export function windowColumns(windows: readonly LimitWindow[]): { limit_day_start: Date | null; limit_night_start: Date | null } {
  return {
    limit_day_start: windows.find((w) => w.kind === 'day')?.start ?? null,
    limit_night_start: windows.find((w) => w.kind === 'night')?.start ?? null,
  };
}

/** The limit windows a cash-out's reservation counted in, from its columns. */
export function windowsOf(row: Pick<OwnedTransaction, 'limit_day_start' | 'limit_night_start'>): LimitWindow[] {
  const windows: LimitWindow[] = [];
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
         failed_at = COALESCE($6, failed_at),
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
      change.failed_at ?? null,
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

/**
 * Claims outbound records at stage 2 (acknowledged by the rail, not final) not sent again since
 * before `staleBefore` (by `rail_checked_at`, or `updated_at` when never), stamping
 * `rail_checked_at` so that neither this process nor another sends them again before the next
 * bound. A stamp more than a minute past `now` was written before the wall clock stepped back: due.
 */
export async function claimSentUnsettled(sql: Sql, staleBefore: Date, now: Date, limit: number): Promise<OwnedTransaction[]> {
  return sql.query<OwnedTransaction>(
    `WITH c AS (
       UPDATE transactions SET rail_checked_at = $2
        WHERE id IN (SELECT id FROM transactions
                      WHERE statement_status = 'in_flight' AND stage = 2
                        AND (COALESCE(rail_checked_at, updated_at) < $1 OR COALESCE(rail_checked_at, updated_at) > $2::timestamptz + interval '1 minute')
                        AND kind IN ('cash_out', 'refund', 'med_refund')
                      ORDER BY COALESCE(rail_checked_at, updated_at) LIMIT $3 FOR UPDATE SKIP LOCKED)
        RETURNING *)
     SELECT c.*, a.merchant_id FROM c JOIN accounts a ON a.id = c.account_id`,
    [staleBefore, now, limit],
  );
}

/** Records that did not happen (an expired charge's): status failed. */
export async function failRecords(tx: Sql, ids: readonly string[], now: Date): Promise<void> {
  if (ids.length === 0) return;
  await tx.query('UPDATE transactions SET status = $3, updated_at = $2 WHERE id = ANY($1::uuid[])', [ids, now, TX_STATUS.failed]);
}

/** The payment that paid a charge, as its statement record shows it. */
export interface ChargePayment {
  endToEndId: string;
  feeAmount: number;
  payerName: string;
  payerDocument: string;
  payerIspb: string;
  payerBankName: string | null;
  paidAt: Date;
  now: Date;
  /** The amount paid, base units (a due-date charge's differs from the amount it was opened with). */
  amount: number;
}

/**
 * Turns a charge's own statement record into the completed inbound credit (after `markPaid`, in
 * the same transaction): status 1, the payment's end-to-end id, fee and payer, `created_at` and
 * `completed_at` = the payment instant (the statement orders money by when it moved; the charge's
 * creation time stays in `pix_charges.created_at`).
 */
export async function completeChargeRecord(tx: Sql, transactionUuid: string, p: ChargePayment): Promise<TransactionRow> {
  const [row] = await tx.query<TransactionRow>(
    `UPDATE transactions SET status = $2, end_to_end_id = $3, fee_amount = $4, counterparty_name = $5,
        payer_document = $6, payer_ispb = $7, payer_bank_name = $8, created_at = $9, completed_at = $9,
        updated_at = $10, amount = $11
      WHERE id = $1 RETURNING *`,
    [transactionUuid, TX_STATUS.completed, p.endToEndId, p.feeAmount, p.payerName, p.payerDocument, p.payerIspb, p.payerBankName, p.paidAt, p.now, p.amount],
  );
  if (!row) throw new Error(`charge record ${transactionUuid} disappeared`);
  return row;
}
