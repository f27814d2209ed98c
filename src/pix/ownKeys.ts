import type { Database, Sql } from '../db/db.js';
import { DomainError, invalidFields } from '../errors/catalog.js';
import { newUuid } from '../lib/ids.js';
import * as merchants from '../merchants/repository.js';
import { KeyAlreadyRegisteredError, RailTimeoutError, type Rail } from '../rail/rail.js';
import { normalizePixKey, type PixKeyType } from './keys.js';

export interface PixKeyRow {
  id: string;
  account_id: number;
  type: PixKeyType;
  key: string;
  status: 'active' | 'inactive';
  created_at: Date;
}

/**
 * Registers a PIX key for one of this institution's accounts: first in the directory (the rail),
 * then locally. If the local insert fails the directory registration is undone.
 */
export async function registerOwnKey(
  db: Database,
  rail: Rail,
  input: { accountId: number; type: PixKeyType; key?: string | undefined },
): Promise<PixKeyRow> {
  const account = await merchants.findAccount(db, input.accountId);
  if (!account) throw invalidFields({ account_id: ['does not exist'] });
  const merchant = (await merchants.findMerchant(db, account.merchant_id))!;
  let raw = input.key;
  if (raw === undefined) {
    if (input.type !== 'evp') throw invalidFields({ key: ['is required'] });
    raw = newUuid();
  }
  const key = normalizePixKey(input.type, raw);
  if (key === null) throw invalidFields({ key: [`is not a valid ${input.type} key`] });
  try {
    await rail.directory.registerKey({ key, type: input.type, name: merchant.name, document: merchant.document, accountId: account.id });
  } catch (err) {
    if (err instanceof KeyAlreadyRegisteredError) throw new DomainError('conflict', { message: 'PIX key is already registered' });
    // No answer in time: the directory may have registered it; undo, best effort.
    if (err instanceof RailTimeoutError) await rail.directory.removeKey(key).catch(() => {});
    throw err;
  }
  try {
    const [row] = await db.query<PixKeyRow>(
      'INSERT INTO pix_keys (account_id, type, key) VALUES ($1, $2, $3) RETURNING *',
      [account.id, input.type, key],
    );
    return row!;
  } catch (err) {
    await rail.directory.removeKey(key);
    throw err;
  }
}

export async function listOwnKeys(sql: Sql, accountId: number): Promise<PixKeyRow[]> {
  return sql.query<PixKeyRow>('SELECT * FROM pix_keys WHERE account_id = $1 ORDER BY created_at, id', [accountId]);
}
