import type { Sql } from '../../db/db.js';
import type { CobvValueText } from './types.js';

/** The SQL of the façade's due-date charges (migration 1110, table api_pix_cobvs, joined with the pixgate charge underneath). */
export type CobvStatus = 'ATIVA' | 'CONCLUIDA' | 'REMOVIDA_PELO_USUARIO_RECEBEDOR' | 'REMOVIDA_PELO_PSP';
export const COBV_STATUSES: readonly CobvStatus[] = ['ATIVA', 'CONCLUIDA', 'REMOVIDA_PELO_USUARIO_RECEBEDOR', 'REMOVIDA_PELO_PSP'];

/** The debtor as the receiver sent it (document canonical). */
export interface Devedor {
  cpf?: string;
  cnpj?: string;
  nome: string;
  email?: string;
  logradouro?: string;
  cidade?: string;
  uf?: string;
  cep?: string;
}

/** What the receiver sent besides money, calendar and key. */
export interface CobvRequestFields {
  devedor: Devedor;
  solicitacaoPagador?: string;
  infoAdicionais?: Array<{ nome: string; valor: string }>;
}

/** The state of one revision (the current one is the row; earlier ones are kept in `revisions`). */
export interface CobvState {
  revisao: number;
  chave: string;
  due_date: string;
  days_after_due: number;
  valor: CobvValueText;
  loc_id: number | null;
  request: CobvRequestFields;
  status: CobvStatus;
  emv: string | null;
}

export interface CobvRow extends CobvState {
  id: number;
  account_id: number;
  merchant_id: number;
  txid: string;
  charge_id: string;
  lote_id: number | null;
  revisions: CobvState[];
  created_at: Date;
  updated_at: Date;
  /** The pixgate charge's own txid, deadline, when it was paid, and the payment (CONCLUIDA). */
  charge_txid: string;
  expires_at: Date;
  paid_at: Date | null;
  paid_amount: number | null;
  end_to_end_id: string | null;
  loc_tipo_cob: 'cob' | 'cobv' | null;
  loc_token: string | null;
  loc_created_at: Date | null;
}

const STATUS_SQL = `CASE pc.status WHEN 'created' THEN 'ATIVA' WHEN 'paid' THEN 'CONCLUIDA'
  WHEN 'cancelled' THEN 'REMOVIDA_PELO_USUARIO_RECEBEDOR' ELSE 'REMOVIDA_PELO_PSP' END`;

const COBV_COLUMNS = `v.id::int AS id, v.account_id, a.merchant_id, v.txid, v.revisao, v.charge_id, v.loc_id::int AS loc_id,
  v.lote_id::int AS lote_id, v.chave, to_char(v.due_date, 'YYYY-MM-DD') AS due_date, v.days_after_due, v.valor, v.request,
  v.revisions, v.emv, v.created_at, v.updated_at, pc.txid AS charge_txid, pc.expires_at, pc.paid_at,
  CASE WHEN pc.status = 'paid' THEN t.amount::float8 ELSE NULL END AS paid_amount, t.end_to_end_id, ${STATUS_SQL} AS status,
  l.tipo_cob AS loc_tipo_cob, l.token AS loc_token, l.created_at AS loc_created_at`;
const COBV_FROM = `api_pix_cobvs v JOIN accounts a ON a.id = v.account_id JOIN pix_charges pc ON pc.transaction_uuid = v.charge_id
  JOIN transactions t ON t.id = v.charge_id LEFT JOIN api_pix_locations l ON l.id = v.loc_id`;

export async function findCobv(sql: Sql, accountId: number, txid: string): Promise<CobvRow | undefined> {
  const [row] = await sql.query<CobvRow>(`SELECT ${COBV_COLUMNS} FROM ${COBV_FROM} WHERE v.account_id = $1 AND v.txid = $2`, [accountId, txid]);
  return row;
}

/** The cobv of `txid`, its row and the charge underneath locked (a payment waits, or is waited for). */
export async function lockCobv(tx: Sql, accountId: number, txid: string): Promise<CobvRow | undefined> {
  const [row] = await tx.query<CobvRow>(`SELECT ${COBV_COLUMNS} FROM ${COBV_FROM} WHERE v.account_id = $1 AND v.txid = $2 FOR UPDATE OF v, pc`, [accountId, txid]);
  return row;
}

export async function findCobvByLocationToken(sql: Sql, token: string): Promise<CobvRow | undefined> {
  const [row] = await sql.query<CobvRow>(`SELECT ${COBV_COLUMNS} FROM ${COBV_FROM} WHERE l.token = $1`, [token]);
  return row;
}

/** Whether a cob (immediate charge) of the account already holds this txid: a txid names one charge per receiver. */
export async function cobHoldsTxid(sql: Sql, accountId: number, txid: string): Promise<boolean> {
  const rows = await sql.query('SELECT 1 FROM api_pix_cobs WHERE account_id = $1 AND txid = $2', [accountId, txid]);
  return rows.length > 0;
}

export interface CobvWrite {
  chargeId: string;
  locId: number | null;
  loteId?: number | null;
  chave: string;
  originalCents: number;
  dueDate: string;
  daysAfterDue: number;
  valor: CobvValueText;
  devedor: Devedor;
  request: CobvRequestFields;
  emv: string | null;
}

/** Inserts a new cobv; null when the txid is taken (a concurrent PUT won). */
export async function insertCobv(tx: Sql, accountId: number, txid: string, w: CobvWrite, now: Date): Promise<number | null> {
  const rows = await tx.query<{ id: number }>(
    `INSERT INTO api_pix_cobvs (account_id, txid, charge_id, loc_id, lote_id, chave, original_cents, due_date, days_after_due, valor,
       devedor_cpf, devedor_cnpj, emv, request, created_at, updated_at)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $15)
     ON CONFLICT (account_id, txid) DO NOTHING RETURNING id::int AS id`,
    [accountId, txid, w.chargeId, w.locId, w.loteId ?? null, w.chave, w.originalCents, w.dueDate, w.daysAfterDue, JSON.stringify(w.valor),
      w.devedor.cpf ?? null, w.devedor.cnpj ?? null, w.emv, JSON.stringify(w.request), now],
  );
  return rows[0]?.id ?? null;
}

/** Writes a revision: the new state, revisao + 1, the previous state appended to `revisions`. */
export async function reviseCobv(tx: Sql, id: number, w: CobvWrite, previous: CobvState, bump: boolean, now: Date): Promise<void> {
  await tx.query(
    `UPDATE api_pix_cobvs SET charge_id = $2, loc_id = $3, chave = $4, original_cents = $5, due_date = $6, days_after_due = $7,
        valor = $8, devedor_cpf = $9, devedor_cnpj = $10, emv = $11, request = $12,
        revisao = revisao + $13, revisions = CASE WHEN $13 = 1 THEN revisions || $14::jsonb ELSE revisions END, updated_at = $15
      WHERE id = $1`,
    [id, w.chargeId, w.locId, w.chave, w.originalCents, w.dueDate, w.daysAfterDue, JSON.stringify(w.valor), w.devedor.cpf ?? null,
      w.devedor.cnpj ?? null, w.emv, JSON.stringify(w.request), bump ? 1 : 0, JSON.stringify([previous]), now],
  );
}

/** Records a removal as a revision (the status comes from the pixgate charge, cancelled in the same transaction). */
export async function markRemoved(tx: Sql, id: number, previous: CobvState, now: Date): Promise<void> {
  await tx.query(`UPDATE api_pix_cobvs SET revisao = revisao + 1, revisions = revisions || $2::jsonb, updated_at = $3 WHERE id = $1`, [
    id,
    JSON.stringify([previous]),
    now,
  ]);
}

export interface CobvFilter {
  accountId: number;
  from: Date;
  to: Date;
  cpf?: string;
  cnpj?: string;
  locationPresent?: boolean;
  status?: CobvStatus;
  loteId?: number;
  offset: number;
  limit: number;
}

/** A page of the account's cobvs created in [from, to], oldest first, and how many match. */
export async function listCobvs(sql: Sql, f: CobvFilter): Promise<{ rows: CobvRow[]; total: number }> {
  const where = `v.account_id = $1 AND v.created_at >= $2 AND v.created_at <= $3
    AND ($4::text IS NULL OR v.devedor_cpf = $4) AND ($5::text IS NULL OR v.devedor_cnpj = $5)
    AND ($6::boolean IS NULL OR (v.loc_id IS NOT NULL) = $6) AND ($7::text IS NULL OR ${STATUS_SQL} = $7)
    AND ($8::bigint IS NULL OR v.lote_id = $8)`;
  const params = [f.accountId, f.from, f.to, f.cpf ?? null, f.cnpj ?? null, f.locationPresent ?? null, f.status ?? null, f.loteId ?? null];
  const [count] = await sql.query<{ n: number }>(`SELECT count(*)::int AS n FROM ${COBV_FROM} WHERE ${where}`, params);
  const rows = await sql.query<CobvRow>(`SELECT ${COBV_COLUMNS} FROM ${COBV_FROM} WHERE ${where} ORDER BY v.created_at, v.id OFFSET $9 LIMIT $10`, [
    ...params,
    f.offset,
    f.limit,
  ]);
  return { rows, total: count!.n };
}

/** DELETE /loc/{id}/txid: the cobv linked to the location loses it (and its BR Code). */
export async function unlinkLocation(tx: Sql, locId: number, now: Date): Promise<void> {
  await tx.query('UPDATE api_pix_cobvs SET loc_id = NULL, emv = NULL, updated_at = $2 WHERE loc_id = $1', [locId, now]);
}
