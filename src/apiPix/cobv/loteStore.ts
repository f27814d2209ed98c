import type { Sql } from '../../db/db.js';

/** The SQL of cobv batches (migration 1110: api_pix_lotes_cobv, api_pix_lote_cobv_items). */
export type LoteItemStatus = 'EM_PROCESSAMENTO' | 'CRIADA' | 'NEGADA';

export interface LoteRow {
  id: number;
  account_id: number;
  descricao: string;
  created_at: Date;
}

export interface LoteItemRow {
  lote_id: number;
  position: number;
  txid: string;
  status: LoteItemStatus;
  problema: Record<string, unknown> | null;
  created_at: Date | null;
}

export async function lockLote(tx: Sql, accountId: number, id: number): Promise<LoteRow | undefined> {
  const [row] = await tx.query<LoteRow>('SELECT id::float8 AS id, account_id, descricao, created_at FROM api_pix_lotes_cobv WHERE account_id = $1 AND id = $2 FOR UPDATE', [accountId, id]);
  return row;
}

export async function findLote(sql: Sql, accountId: number, id: number): Promise<LoteRow | undefined> {
  const [row] = await sql.query<LoteRow>('SELECT id::float8 AS id, account_id, descricao, created_at FROM api_pix_lotes_cobv WHERE account_id = $1 AND id = $2', [accountId, id]);
  return row;
}

/** Inserts a batch; false when the id is taken (a concurrent PUT won). */
export async function insertLote(tx: Sql, accountId: number, id: number, descricao: string, now: Date): Promise<boolean> {
  const rows = await tx.query('INSERT INTO api_pix_lotes_cobv (account_id, id, descricao, created_at) VALUES ($1, $2, $3, $4) ON CONFLICT DO NOTHING RETURNING id', [accountId, id, descricao, now]);
  return rows.length === 1;
}

export async function setDescricao(tx: Sql, accountId: number, id: number, descricao: string): Promise<void> {
  await tx.query('UPDATE api_pix_lotes_cobv SET descricao = $3 WHERE account_id = $1 AND id = $2', [accountId, id, descricao]);
}

export async function insertItems(tx: Sql, accountId: number, loteId: number, txids: string[], now: Date): Promise<void> {
  await tx.query(
    `INSERT INTO api_pix_lote_cobv_items (account_id, lote_id, position, txid, status, updated_at)
     SELECT $1, $2, p.ord - 1, p.txid, 'EM_PROCESSAMENTO', $4 FROM unnest($3::text[]) WITH ORDINALITY AS p(txid, ord)`,
    [accountId, loteId, txids, now],
  );
}

export async function items(sql: Sql, accountId: number, loteId: number): Promise<LoteItemRow[]> {
  return sql.query<LoteItemRow>(
    `SELECT lote_id::float8 AS lote_id, position, txid, status, problema, created_at FROM api_pix_lote_cobv_items
      WHERE account_id = $1 AND lote_id = $2 ORDER BY position`,
    [accountId, loteId],
  );
}

/** The batch item naming `txid`, if a batch of the account names it. */
export async function itemOfTxid(sql: Sql, accountId: number, txid: string): Promise<LoteItemRow | undefined> {
  const [row] = await sql.query<LoteItemRow>(
    'SELECT lote_id::float8 AS lote_id, position, txid, status, problema, created_at FROM api_pix_lote_cobv_items WHERE account_id = $1 AND txid = $2',
    [accountId, txid],
  );
  return row;
}

export async function markItem(sql: Sql, accountId: number, loteId: number, txid: string, outcome: { status: LoteItemStatus; problema: Record<string, unknown> | null; createdAt: Date | null }, now: Date): Promise<void> {
  await sql.query(
    `UPDATE api_pix_lote_cobv_items SET status = $4, problema = $5, created_at = COALESCE(created_at, $6), updated_at = $7
      WHERE account_id = $1 AND lote_id = $2 AND txid = $3`,
    [accountId, loteId, txid, outcome.status, outcome.problema === null ? null : JSON.stringify(outcome.problema), outcome.createdAt, now],
  );
}

/** A page of the account's batches created in [from, to], oldest first, and how many match. */
export async function listLotes(sql: Sql, accountId: number, from: Date, to: Date, offset: number, limit: number): Promise<{ rows: LoteRow[]; total: number }> {
  const where = 'account_id = $1 AND created_at >= $2 AND created_at <= $3';
  const [count] = await sql.query<{ n: number }>(`SELECT count(*)::int AS n FROM api_pix_lotes_cobv WHERE ${where}`, [accountId, from, to]);
  const rows = await sql.query<LoteRow>(
    `SELECT id::float8 AS id, account_id, descricao, created_at FROM api_pix_lotes_cobv WHERE ${where} ORDER BY created_at, id OFFSET $4 LIMIT $5`,
    [accountId, from, to, offset, limit],
  );
  return { rows, total: count!.n };
}
