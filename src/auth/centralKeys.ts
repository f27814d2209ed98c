import type { Database, Sql } from '../db/db.js';
import { newSecret } from '../lib/ids.js';
import { secretDigest } from './secrets.js';

/** Keys of the boleto central API (`X-API-Key`). Stored as a SHA-256 digest, like API secrets. */
export async function createCentralKey(db: Database, name: string): Promise<{ id: number; apiKey: string }> {
  const apiKey = newSecret('ck_');
  const [row] = await db.query<{ id: number }>(
    'INSERT INTO central_api_keys (name, key_hash) VALUES ($1, $2) RETURNING id',
    [name, secretDigest(apiKey)],
  );
  return { id: row!.id, apiKey };
}

export interface CentralKeyRow {
  id: number;
  name: string;
  active: boolean;
}

/** Looks a presented key up by its digest (a unique index: constant work, no secret comparison). */
export async function findCentralKey(sql: Sql, apiKey: string): Promise<CentralKeyRow | undefined> {
  const [row] = await sql.query<CentralKeyRow>(
    'SELECT id, name, active FROM central_api_keys WHERE key_hash = $1',
    [secretDigest(apiKey)],
  );
  return row;
}
