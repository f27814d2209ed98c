import type { Sql } from '../db/db.js';

/** The SQL of the façade's payload locations (migration 1010, table api_pix_locations). */
export type TipoCob = 'cob' | 'cobv';

export interface LocationRow {
  id: number;
  account_id: number;
  tipo_cob: TipoCob;
  token: string;
  created_at: Date;
  /** The txid of the charge linked to it now, if any. */
  txid: string | null;
}

// The linked charge is a cob's or a cobv's (src/apiPix/cobv/, migration 1110); a location holds at most one.
const LOCATION_COLUMNS = `l.id::int AS id, l.account_id, l.tipo_cob, l.token, l.created_at, COALESCE(c.txid, v.txid) AS txid`;
const LOCATION_FROM = 'api_pix_locations l LEFT JOIN api_pix_cobs c ON c.loc_id = l.id LEFT JOIN api_pix_cobvs v ON v.loc_id = l.id';

export async function insertLocation(sql: Sql, accountId: number, tipoCob: TipoCob, token: string, now: Date): Promise<LocationRow> {
  const [row] = await sql.query<LocationRow>(
    `INSERT INTO api_pix_locations (account_id, tipo_cob, token, created_at) VALUES ($1, $2, $3, $4)
     RETURNING id::int AS id, account_id, tipo_cob, token, created_at, NULL::text AS txid`,
    [accountId, tipoCob, token, now],
  );
  return row!;
}

export async function findLocation(sql: Sql, accountId: number, id: number): Promise<LocationRow | undefined> {
  const [row] = await sql.query<LocationRow>(`SELECT ${LOCATION_COLUMNS} FROM ${LOCATION_FROM} WHERE l.account_id = $1 AND l.id = $2`, [accountId, id]);
  return row;
}

/** The location of a token, locked with its linked charge row (none when unlinked). */
export async function lockLocation(tx: Sql, accountId: number, id: number): Promise<LocationRow | undefined> {
  const [row] = await tx.query<LocationRow>(`SELECT ${LOCATION_COLUMNS} FROM ${LOCATION_FROM} WHERE l.account_id = $1 AND l.id = $2 FOR UPDATE OF l`, [accountId, id]);
  return row;
}

export async function findLocationByToken(sql: Sql, token: string): Promise<LocationRow | undefined> {
  const [row] = await sql.query<LocationRow>(`SELECT ${LOCATION_COLUMNS} FROM ${LOCATION_FROM} WHERE l.token = $1`, [token]);
  return row;
}

export interface LocationFilter {
  accountId: number;
  from: Date;
  to: Date;
  txidPresent?: boolean;
  tipoCob?: TipoCob;
  offset: number;
  limit: number;
}

/** A page of the account's locations created in [from, to], oldest first, and how many match. */
export async function listLocations(sql: Sql, f: LocationFilter): Promise<{ rows: LocationRow[]; total: number }> {
  const where = `l.account_id = $1 AND l.created_at >= $2 AND l.created_at <= $3
    AND ($4::boolean IS NULL OR (COALESCE(c.txid, v.txid) IS NOT NULL) = $4) AND ($5::text IS NULL OR l.tipo_cob = $5)`;
  const params = [f.accountId, f.from, f.to, f.txidPresent ?? null, f.tipoCob ?? null];
  const [count] = await sql.query<{ n: number }>(`SELECT count(*)::int AS n FROM ${LOCATION_FROM} WHERE ${where}`, params);
  const rows = await sql.query<LocationRow>(`SELECT ${LOCATION_COLUMNS} FROM ${LOCATION_FROM} WHERE ${where} ORDER BY l.created_at, l.id OFFSET $6 LIMIT $7`, [...params, f.offset, f.limit]);
  return { rows, total: count!.n };
}
