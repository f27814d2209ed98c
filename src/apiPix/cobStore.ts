import type { Sql } from '../db/db.js';

/** The SQL of the façade's charges (migration 1010, table api_pix_cobs, joined with the pixgate charge underneath). */
export type CobStatus = 'ATIVA' | 'CONCLUIDA' | 'REMOVIDA_PELO_USUARIO_RECEBEDOR' | 'REMOVIDA_PELO_PSP';
export const COB_STATUSES: readonly CobStatus[] = ['ATIVA', 'CONCLUIDA', 'REMOVIDA_PELO_USUARIO_RECEBEDOR', 'REMOVIDA_PELO_PSP'];

/** What the receiver sent besides money and key (kept as sent, in the standard's names). */
export interface CobRequestFields {
  devedor?: { cpf?: string; cnpj?: string; nome: string };
  solicitacaoPagador?: string;
  infoAdicionais?: Array<{ nome: string; valor: string }>;
}

/** The state of one revision (the current one is the row; earlier ones are kept in `revisions`). */
export interface CobState {
  revisao: number;
  chave: string;
  amount_cents: number;
  modalidade_alteracao: number;
  expiracao: number;
  loc_id: number | null;
  request: CobRequestFields;
  status: CobStatus;
  emv: string | null;
}

export interface CobRow extends CobState {
  id: number;
  account_id: number;
  merchant_id: number;
  txid: string;
  charge_id: string;
  devedor_cpf: string | null;
  devedor_cnpj: string | null;
  revisions: CobState[];
  created_at: Date;
  updated_at: Date;
  /** The pixgate charge's own txid (what a payment through the rail carries), its deadline, and when it was paid (CONCLUIDA). */
  charge_txid: string;
  expires_at: Date;
  paid_at: Date | null;
  /** The linked location, if any. */
  loc_tipo_cob: 'cob' | 'cobv' | null;
  loc_token: string | null;
  loc_created_at: Date | null;
}

/** The standard's status of a cob: its pixgate charge's. */
const STATUS_SQL = `CASE pc.status WHEN 'created' THEN 'ATIVA' WHEN 'paid' THEN 'CONCLUIDA'
  WHEN 'cancelled' THEN 'REMOVIDA_PELO_USUARIO_RECEBEDOR' ELSE 'REMOVIDA_PELO_PSP' END`;

const COB_COLUMNS = `c.id::int AS id, c.account_id, a.merchant_id, c.txid, c.revisao, c.charge_id, c.loc_id::int AS loc_id, c.chave,
  c.amount_cents::float8 AS amount_cents, c.modalidade_alteracao, c.expiracao, c.devedor_cpf, c.devedor_cnpj, c.request, c.revisions,
  c.emv, c.created_at, c.updated_at, pc.txid AS charge_txid, pc.expires_at, pc.paid_at, ${STATUS_SQL} AS status,
  l.tipo_cob AS loc_tipo_cob, l.token AS loc_token, l.created_at AS loc_created_at`;
const COB_FROM = `api_pix_cobs c JOIN accounts a ON a.id = c.account_id JOIN pix_charges pc ON pc.transaction_uuid = c.charge_id
  LEFT JOIN api_pix_locations l ON l.id = c.loc_id`;

export async function findCob(sql: Sql, accountId: number, txid: string): Promise<CobRow | undefined> {
  const [row] = await sql.query<CobRow>(`SELECT ${COB_COLUMNS} FROM ${COB_FROM} WHERE c.account_id = $1 AND c.txid = $2`, [accountId, txid]);
  return row;
}

/** The cob of `txid`, its row locked (and the charge underneath: a payment waits, or is waited for). */
export async function lockCob(tx: Sql, accountId: number, txid: string): Promise<CobRow | undefined> {
  const [row] = await tx.query<CobRow>(`SELECT ${COB_COLUMNS} FROM ${COB_FROM} WHERE c.account_id = $1 AND c.txid = $2 FOR UPDATE OF c, pc`, [accountId, txid]);
  return row;
}

export async function findCobByLocationToken(sql: Sql, token: string): Promise<CobRow | undefined> {
  const [row] = await sql.query<CobRow>(`SELECT ${COB_COLUMNS} FROM ${COB_FROM} WHERE l.token = $1`, [token]);
  return row;
}

export interface NewCob {
  accountId: number;
  txid: string;
  chargeId: string;
  locId: number | null;
  chave: string;
  amountCents: number;
  modalidadeAlteracao: number;
  expiracao: number;
  devedorCpf: string | null;
  devedorCnpj: string | null;
  request: CobRequestFields;
  emv: string | null;
  now: Date;
}

export async function insertCob(tx: Sql, c: NewCob): Promise<void> {
  await tx.query(
    `INSERT INTO api_pix_cobs (account_id, txid, charge_id, loc_id, chave, amount_cents, modalidade_alteracao, expiracao,
                               devedor_cpf, devedor_cnpj, request, emv, created_at, updated_at)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11::jsonb, $12, $13, $13)`,
    [c.accountId, c.txid, c.chargeId, c.locId, c.chave, c.amountCents, c.modalidadeAlteracao, c.expiracao, c.devedorCpf, c.devedorCnpj, JSON.stringify(c.request), c.emv, c.now],
  );
}

export interface CobUpdate {
  chargeId: string;
  locId: number | null;
  chave: string;
  amountCents: number;
  modalidadeAlteracao: number;
  expiracao: number;
  devedorCpf: string | null;
  devedorCnpj: string | null;
  request: CobRequestFields;
  emv: string | null;
  /** The state being replaced, appended to `revisions`. */
  previous: CobState;
  now: Date;
}

/** Writes a new revision (revisao + 1), keeping the previous one's state. */
export async function reviseCob(tx: Sql, id: number, u: CobUpdate): Promise<void> {
  await tx.query(
    `UPDATE api_pix_cobs SET revisao = revisao + 1, charge_id = $2, loc_id = $3, chave = $4, amount_cents = $5,
        modalidade_alteracao = $6, expiracao = $7, devedor_cpf = $8, devedor_cnpj = $9, request = $10::jsonb, emv = $11,
        revisions = revisions || jsonb_build_array($12::jsonb), updated_at = $13
      WHERE id = $1`,
    [id, u.chargeId, u.locId, u.chave, u.amountCents, u.modalidadeAlteracao, u.expiracao, u.devedorCpf, u.devedorCnpj, JSON.stringify(u.request), u.emv, JSON.stringify(u.previous), u.now],
  );
}

/** Unlinks a cob from its location (DELETE /loc/{id}/txid): no location, no BR Code. */
export async function unlinkLocation(tx: Sql, locId: number, now: Date): Promise<void> {
  await tx.query('UPDATE api_pix_cobs SET loc_id = NULL, emv = NULL, updated_at = $2 WHERE loc_id = $1', [locId, now]);
}

export interface CobFilter {
  accountId: number;
  from: Date;
  to: Date;
  cpf?: string;
  cnpj?: string;
  locationPresent?: boolean;
  status?: CobStatus;
  offset: number;
  limit: number;
}

/** A page of the account's cobs created in [from, to], oldest first, and how many match. */
export async function listCobs(sql: Sql, f: CobFilter): Promise<{ rows: CobRow[]; total: number }> {
  const where = `c.account_id = $1 AND c.created_at >= $2 AND c.created_at <= $3
    AND ($4::text IS NULL OR c.devedor_cpf = $4) AND ($5::text IS NULL OR c.devedor_cnpj = $5)
    AND ($6::boolean IS NULL OR (c.loc_id IS NOT NULL) = $6) AND ($7::text IS NULL OR ${STATUS_SQL} = $7)`;
  const params = [f.accountId, f.from, f.to, f.cpf ?? null, f.cnpj ?? null, f.locationPresent ?? null, f.status ?? null];
  const [count] = await sql.query<{ n: number }>(`SELECT count(*)::int AS n FROM ${COB_FROM} WHERE ${where}`, params);
  const rows = await sql.query<CobRow>(`SELECT ${COB_COLUMNS} FROM ${COB_FROM} WHERE ${where} ORDER BY c.created_at, c.id OFFSET $8 LIMIT $9`, [...params, f.offset, f.limit]);
  return { rows, total: count!.n };
}
