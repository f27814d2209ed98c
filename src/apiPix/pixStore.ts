import type { Sql } from '../db/db.js';
import type { ReceivedRecord, ReturnRecord } from './pixViews.js';

/**
 * SQL of the received Pix and their returns as API Pix reads them (tables of src/transactions and
 * src/pix, read only here) and of `api_pix_returns` (migration 1200), which this module owns.
 * A received Pix is a completed inbound PIX record (`pix_in`, or a paid charge `charge`) with an
 * end-to-end id; its txid and key are its charge's (the standard's `cob` or `cobv` when the charge is one,
 * migration 1010), or the txid the payer's order carried.
 */

/** Which accounts a caller sees: every account of the merchant, or the API key's one. */
export interface ReceiverScope {
  merchantId: number;
  accountId: number | null;
}

const RECEIVED = `
  SELECT t.id, t.transaction_id, t.end_to_end_id, t.amount, t.completed_at, t.created_at, t.account_id,
         COALESCE(s.txid, v.txid, c.txid, t.metadata->>'txid') AS txid,
         COALESCE(s.chave, v.chave, c.pix_key) AS chave,
         CASE WHEN t.kind = 'pix_in' AND t.description <> '' THEN t.description END AS info_pagador
    FROM transactions t
    JOIN accounts a ON a.id = t.account_id
    LEFT JOIN pix_charges c ON c.transaction_uuid = t.id
    LEFT JOIN api_pix_cobs s ON s.charge_id = t.id
    LEFT JOIN api_pix_cobvs v ON v.charge_id = t.id
   WHERE t.kind IN ('pix_in', 'charge') AND t.direction = 'inbound' AND t.status = 1 AND t.end_to_end_id IS NOT NULL
     AND a.merchant_id = $1 AND ($2::bigint IS NULL OR t.account_id = $2)`;

export type ReceivedRow = ReceivedRecord & { account_id: number; transaction_id: string };

/** A received Pix of the scope by its end-to-end id. */
export async function findReceived(sql: Sql, scope: ReceiverScope, endToEndId: string): Promise<ReceivedRow | undefined> {
  const [row] = await sql.query<ReceivedRow>(`${RECEIVED} AND t.end_to_end_id = $3`, [scope.merchantId, scope.accountId, endToEndId]);
  return row;
}

/** Received Pix of the scope by their end-to-end ids (those not found are left out). */
export async function findReceivedMany(sql: Sql, scope: ReceiverScope, endToEndIds: readonly string[]): Promise<ReceivedRow[]> {
  if (endToEndIds.length === 0) return [];
  return sql.query<ReceivedRow>(`${RECEIVED} AND t.end_to_end_id = ANY($3::text[]) ORDER BY t.created_at, t.id`, [scope.merchantId, scope.accountId, endToEndIds]);
}

export interface ReceivedFilter {
  inicio: Date;
  fim: Date;
  txid?: string | undefined;
  txIdPresente?: boolean | undefined;
  devolucaoPresente?: boolean | undefined;
  /** The payer's CPF or CNPJ. */
  document?: string | undefined;
  page: number;
  perPage: number;
}

/** One page of received Pix of the scope, oldest first, and how many match in all. */
export async function listReceived(sql: Sql, scope: ReceiverScope, f: ReceivedFilter): Promise<{ rows: ReceivedRow[]; total: number }> {
  const rows = await sql.query<ReceivedRow & { total: number }>(
    `SELECT r.*, count(*) OVER ()::int AS total FROM (${RECEIVED}
        AND t.created_at >= $3 AND t.created_at <= $4
        AND ($5::text IS NULL OR t.payer_document = $5)) r
      WHERE ($6::text IS NULL OR r.txid = $6)
        AND ($7::boolean IS NULL OR (r.txid IS NOT NULL) = $7)
        AND ($8::boolean IS NULL OR EXISTS (SELECT 1 FROM transactions d WHERE d.original_id = r.id AND d.kind IN ('refund', 'med_refund')) = $8)
      ORDER BY r.created_at, r.id
      LIMIT $9 OFFSET $10`,
    [
      scope.merchantId,
      scope.accountId,
      f.inicio,
      f.fim,
      f.document ?? null,
      f.txid ?? null,
      f.txIdPresente ?? null,
      f.devolucaoPresente ?? null,
      f.perPage,
      f.page * f.perPage,
    ],
  );
  if (rows.length > 0) return { rows, total: rows[0]!.total };
  // A page past the end: count what matches (the window function had no row to ride on).
  if (f.page === 0) return { rows: [], total: 0 };
  const [count] = await sql.query<{ total: number }>(
    `SELECT count(*)::int AS total FROM (${RECEIVED}
        AND t.created_at >= $3 AND t.created_at <= $4
        AND ($5::text IS NULL OR t.payer_document = $5)) r
      WHERE ($6::text IS NULL OR r.txid = $6)
        AND ($7::boolean IS NULL OR (r.txid IS NOT NULL) = $7)
        AND ($8::boolean IS NULL OR EXISTS (SELECT 1 FROM transactions d WHERE d.original_id = r.id AND d.kind IN ('refund', 'med_refund')) = $8)`,
    [scope.merchantId, scope.accountId, f.inicio, f.fim, f.document ?? null, f.txid ?? null, f.txIdPresente ?? null, f.devolucaoPresente ?? null],
  );
  return { rows: [], total: count!.total };
}

/** Returns (voluntary and MED) of the given received Pix, in the order they were asked, by original. */
export async function returnsOf(sql: Sql, originalIds: readonly string[]): Promise<Map<string, ReturnRecord[]>> {
  const out = new Map<string, ReturnRecord[]>();
  if (originalIds.length === 0) return out;
  const rows = await sql.query<ReturnRecord & { original_id: string }>(
    `SELECT d.original_id, d.transaction_id, d.end_to_end_id, d.amount, d.status, d.return_code, d.description, d.reason,
            d.created_at, d.completed_at, r.return_id
       FROM transactions d LEFT JOIN api_pix_returns r ON r.refund_id = d.id
      WHERE d.original_id = ANY($1::uuid[]) AND d.kind IN ('refund', 'med_refund')
      ORDER BY d.created_at, d.id`,
    [originalIds],
  );
  for (const row of rows) {
    const list = out.get(row.original_id) ?? [];
    list.push(row);
    out.set(row.original_id, list);
  }
  return out;
}

/** One return of a received Pix: by the client's id, or (a return not asked through API Pix) by its transaction_id. */
export async function findReturn(sql: Sql, originalId: string, id: string): Promise<(ReturnRecord & { fingerprint: string | null }) | undefined> {
  const [row] = await sql.query<ReturnRecord & { fingerprint: string | null }>(
    `SELECT d.transaction_id, d.end_to_end_id, d.amount, d.status, d.return_code, d.description, d.reason,
            d.created_at, d.completed_at, r.return_id, r.fingerprint
       FROM transactions d LEFT JOIN api_pix_returns r ON r.refund_id = d.id
      WHERE d.original_id = $1 AND d.kind IN ('refund', 'med_refund')
        AND (r.return_id = $2 OR (r.return_id IS NULL AND d.transaction_id = $2))
      ORDER BY r.return_id IS NULL
      LIMIT 1`,
    [originalId, id],
  );
  return row;
}

/** Binds the client's id of a return to its refund record (in the refund's transaction). */
export async function bindReturn(tx: Sql, r: { originalId: string; returnId: string; refundId: string; natureza: string; fingerprint: string }): Promise<void> {
  await tx.query(
    'INSERT INTO api_pix_returns (original_id, return_id, refund_id, natureza, fingerprint) VALUES ($1, $2, $3, $4, $5)',
    [r.originalId, r.returnId, r.refundId, r.natureza, r.fingerprint],
  );
}
