import type { Database, Sql } from '../db/db.js';
import { invalidFields } from '../errors/catalog.js';
import { newSecret } from '../lib/ids.js';
import { findAccount } from '../merchants/repository.js';
import { secretDigest } from './secrets.js';

/**
 * Keys of the boleto central API (`X-API-Key`). Stored as a SHA-256 digest, like API secrets.
 * `accountId` is the beneficiary account: boletos the key registers with this institution's ISPB
 * as `beneficiary_ispb` are credited to it at settlement (docs/boleto-api.md).
 */
export async function createCentralKey(
  db: Database,
  name: string,
  accountId: number | null = null,
): Promise<{ id: number; apiKey: string; accountId: number | null }> {
  return db.transaction(async (tx) => {
    if (accountId !== null && !(await findAccount(tx, accountId))) throw invalidFields({ account_id: ['does not exist'] });
    const apiKey = newSecret('ck_');
    const [row] = await tx.query<{ id: number }>(
      'INSERT INTO central_api_keys (name, key_hash, account_id) VALUES ($1, $2, $3) RETURNING id',
      [name, secretDigest(apiKey), accountId],
    );
    return { id: row!.id, apiKey, accountId };
  });
}

export interface CentralKeyRow {
  id: number;
  name: string;
  active: boolean;
  account_id: number | null;
}

/** Looks a presented key up by its digest (a unique index: constant work, no secret comparison). */
export async function findCentralKey(sql: Sql, apiKey: string): Promise<CentralKeyRow | undefined> {
  const [row] = await sql.query<CentralKeyRow>(
    'SELECT id, name, active, account_id FROM central_api_keys WHERE key_hash = $1',
    [secretDigest(apiKey)],
  );
  return row;
}
