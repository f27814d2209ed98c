import type { Sql } from '../db/db.js';

/** The SQL of the façade's access tokens (migration 1000, table api_pix_tokens). */
export interface TokenRow {
  token_hash: string;
  client_id: string;
  scopes: string[];
  cert_sha256: string | null;
  issued_at: Date;
  expires_at: Date;
}

export async function insertToken(sql: Sql, row: TokenRow): Promise<void> {
  await sql.query(
    `INSERT INTO api_pix_tokens (token_hash, client_id, scopes, cert_sha256, issued_at, expires_at)
     VALUES ($1, $2, $3::text[], $4, $5, $6)`,
    [row.token_hash, row.client_id, row.scopes, row.cert_sha256, row.issued_at, row.expires_at],
  );
}

/**
 * Drops the key's tokens that ran out before `now`, and its live ones beyond the newest `keep`
 * (a client that asks for a token per call never grows the table past that bound).
 */
export async function pruneTokens(sql: Sql, clientId: string, now: Date, keep: number): Promise<void> {
  await sql.query(
    `DELETE FROM api_pix_tokens t
      WHERE t.client_id = $1
        AND (t.expires_at <= $2
             OR t.token_hash IN (SELECT token_hash FROM api_pix_tokens
                                  WHERE client_id = $1 AND expires_at > $2
                                  ORDER BY issued_at DESC, token_hash OFFSET $3))`,
    [clientId, now, keep],
  );
}

export async function findToken(sql: Sql, tokenHash: string): Promise<TokenRow | undefined> {
  const [row] = await sql.query<TokenRow>('SELECT * FROM api_pix_tokens WHERE token_hash = $1', [tokenHash]);
  return row;
}
