import type { DueTerms } from '../../apiPix/cobv/amountDue.js';
import type { Sql } from '../../db/db.js';
import { failRecords } from '../../transactions/records.js';
import type { PixKeyType } from '../keys.js';

/** The life cycle of a cash-in charge (the spec's charge event statuses). */
export const CHARGE_STATUSES = ['created', 'paid', 'expired', 'cancelled'] as const;
export type ChargeStatus = (typeof CHARGE_STATUSES)[number];

/** A charge as pixgate reads it: its statement record (`transactions`) joined with `pix_charges`. */
export interface ChargeRow {
  /** transactions.id (internal UUID) = pix_charges.transaction_uuid */
  id: string;
  transaction_id: string;
  account_id: number;
  merchant_id: number;
  amount: number;
  description: string;
  tag: string | null;
  external_id: string | null;
  request_fingerprint: string | null;
  txid: string;
  pix_key: string;
  pix_key_type: PixKeyType;
  brcode: string;
  status: ChargeStatus;
  payer_name: string | null;
  payer_document: string | null;
  created_at: Date;
  expires_at: Date;
  paid_at: Date | null;
  expired_at: Date | null;
  cancelled_at: Date | null;
  /** A due-date charge's terms (the API Pix façade's cobv): the amount depends on the payment date. */
  due_terms: DueTerms | null;
}

const CHARGE_COLUMNS = `t.id, t.transaction_id, t.account_id, a.merchant_id, t.amount, t.description, t.tag, t.external_id,
  t.request_fingerprint, c.txid, c.pix_key, c.pix_key_type, c.brcode, c.status, c.payer_name,
  c.payer_document, c.created_at, c.expires_at, c.paid_at, c.expired_at, c.cancelled_at, c.due_terms`;
const CHARGE_FROM = 'pix_charges c JOIN transactions t ON t.id = c.transaction_uuid JOIN accounts a ON a.id = t.account_id';

export interface NewCharge {
  transactionUuid: string;
  accountId: number;
  txid: string;
  pixKey: string;
  pixKeyType: PixKeyType;
  brcode: string;
  payerName: string | null;
  payerDocument: string | null;
  createdAt: Date;
  expiresAt: Date;
}

export async function insertCharge(tx: Sql, c: NewCharge): Promise<void> {
  await tx.query(
    `INSERT INTO pix_charges (transaction_uuid, account_id, txid, pix_key, pix_key_type, brcode,
                              payer_name, payer_document, expires_at, created_at, updated_at)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $10)`,
    [c.transactionUuid, c.accountId, c.txid, c.pixKey, c.pixKeyType, c.brcode, c.payerName, c.payerDocument, c.expiresAt, c.createdAt],
  );
}

export async function findCharge(sql: Sql, transactionUuid: string): Promise<ChargeRow | undefined> {
  const [row] = await sql.query<ChargeRow>(`SELECT ${CHARGE_COLUMNS} FROM ${CHARGE_FROM} WHERE c.transaction_uuid = $1`, [transactionUuid]);
  return row;
}

/**
 * A charge of an account by any of its ids: the internal UUID (`id`), `transaction_id`, `txid` or
 * `external_id`. Another account's charge is not found.
 */
export async function findAccountCharge(sql: Sql, accountId: number, anyId: string): Promise<ChargeRow | undefined> {
  const isUuid = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i.test(anyId);
  const [row] = await sql.query<ChargeRow>(
    `SELECT ${CHARGE_COLUMNS} FROM ${CHARGE_FROM}
      WHERE t.account_id = $1
        AND (($3::uuid IS NOT NULL AND c.transaction_uuid = $3::uuid) OR t.transaction_id = $2 OR c.txid = $2 OR t.external_id = $2)
      LIMIT 1`,
    [accountId, anyId, isUuid ? anyId.toLowerCase() : null],
  );
  return row;
}

/** What already holds an account's `external_id` (any kind of movement), with its charge if it is one. */
export interface ExternalIdHolder {
  kind: string;
  request_fingerprint: string | null;
  charge: ChargeRow | undefined;
}

export async function findByExternalId(sql: Sql, accountId: number, externalId: string): Promise<ExternalIdHolder | undefined> {
  const [row] = await sql.query<{ id: string; kind: string; request_fingerprint: string | null }>(
    'SELECT id, kind, request_fingerprint FROM transactions WHERE account_id = $1 AND external_id = $2',
    [accountId, externalId],
  );
  if (!row) return undefined;
  return { kind: row.kind, request_fingerprint: row.request_fingerprint, charge: row.kind === 'charge' ? await findCharge(sql, row.id) : undefined };
}

/**
 * Locks and returns the charge of a txid (SELECT … FOR UPDATE), so that a payment, the expiry worker
 * and a cancellation of one charge run one after another.
 */
export async function lockChargeByTxid(tx: Sql, txid: string): Promise<ChargeRow | undefined> {
  const [row] = await tx.query<ChargeRow>(`SELECT ${CHARGE_COLUMNS} FROM ${CHARGE_FROM} WHERE c.txid = $1 FOR UPDATE OF c`, [txid]);
  return row;
}

/**
 * Claims up to `limit` open charges whose deadline has passed, oldest deadline first. Rows another
 * process holds are skipped (FOR UPDATE SKIP LOCKED), so any number of workers can sweep together.
 */
/** The earliest deadline of an open charge (null: none), for the expiry worker's sleep. */
export async function earliestOpenExpiry(sql: Sql): Promise<Date | null> {
  const [row] = await sql.query<{ at: Date | null }>(`SELECT min(expires_at) AS at FROM pix_charges WHERE status = 'created'`);
  return row?.at ?? null;
}

export async function claimDueCharges(tx: Sql, now: Date, limit: number): Promise<ChargeRow[]> {
  return tx.query<ChargeRow>(
    `SELECT ${CHARGE_COLUMNS} FROM ${CHARGE_FROM}
      WHERE c.status = 'created' AND c.expires_at <= $1
      ORDER BY c.expires_at, c.transaction_uuid
      LIMIT $2
      FOR UPDATE OF c SKIP LOCKED`,
    [now, limit],
  );
}

/**
 * Marks locked open charges expired at their deadline; their statement records leave the pending
 * status for `failed` (the movement did not happen). Returns the uuids actually changed.
 */
export async function markExpired(tx: Sql, transactionUuids: readonly string[], now: Date): Promise<string[]> {
  if (transactionUuids.length === 0) return [];
  const rows = await tx.query<{ transaction_uuid: string }>(
    `UPDATE pix_charges SET status = 'expired', expired_at = expires_at, updated_at = $2
      WHERE transaction_uuid = ANY($1::uuid[]) AND status = 'created'
      RETURNING transaction_uuid`,
    [transactionUuids, now],
  );
  const changed = rows.map((r) => r.transaction_uuid);
  await failRecords(tx, changed, now);
  return changed;
}

/**
 * Cancels an open charge (the API Pix façade's removal or revision); its statement record leaves
 * the pending status for `failed`. False when the charge was no longer open (paid, expired).
 */
export async function markCancelled(tx: Sql, transactionUuid: string, now: Date): Promise<boolean> {
  const rows = await tx.query<{ transaction_uuid: string }>(
    `UPDATE pix_charges SET status = 'cancelled', cancelled_at = $2, updated_at = $2
      WHERE transaction_uuid = $1 AND status = 'created' RETURNING transaction_uuid`,
    [transactionUuid, now],
  );
  await failRecords(tx, rows.map((r) => r.transaction_uuid), now);
  return rows.length === 1;
}

/**
 * Marks a locked open charge paid (pix_charges only). The caller — the inbound crediting (`receiveInboundPayment`) —
 * completes the same `transactions` row in the same database transaction (status 1, end_to_end_id,
 * payer, fee, completed_at) with its ledger posting and the `pix.charge.paid` event.
 */
export async function markPaid(tx: Sql, transactionUuid: string, paidAt: Date): Promise<boolean> {
  const rows = await tx.query(
    `UPDATE pix_charges SET status = 'paid', paid_at = $2, updated_at = $2
      WHERE transaction_uuid = $1 AND status = 'created' RETURNING transaction_uuid`,
    [transactionUuid, paidAt],
  );
  return rows.length === 1;
}

/** The charge of a txid, without locking (the sandbox payer's look before paying). */
export async function findChargeByTxid(sql: Sql, txid: string): Promise<ChargeRow | undefined> {
  const [row] = await sql.query<ChargeRow>(`SELECT ${CHARGE_COLUMNS} FROM ${CHARGE_FROM} WHERE c.txid = $1`, [txid]);
  return row;
}



/** Makes an open charge a due-date charge (migration 1110): what it asks depends on the payment date. */
export async function setDueTerms(tx: Sql, transactionUuid: string, terms: DueTerms): Promise<void> {
  await tx.query('UPDATE pix_charges SET due_terms = $2 WHERE transaction_uuid = $1', [transactionUuid, JSON.stringify(terms)]);
}
