import type { Database, Sql } from '../db/db.js';
import { DomainError, invalidFields } from '../errors/catalog.js';
import { newClientId, newSecret } from '../lib/ids.js';
import * as merchants from '../merchants/repository.js';
import type { Permission } from './permissions.js';
import { secretDigest } from './secrets.js';

export interface ApiKeyRow {
  client_id: string;
  secret_hash: string;
  merchant_id: number;
  account_id: number | null;
  permissions: string[];
  ip_whitelist: string[];
  hmac_enabled: boolean;
  active: boolean;
  expires_at: Date | null;
  created_at: Date;
  updated_at: Date;
  revoked_at: Date | null;
  /** SHA-256 (hex) of the TLS client certificate bound to the key for the API Pix façade (migration 1020). */
  api_pix_cert_sha256: string | null;
  /** A label the merchant gives the key (migration 1600). */
  name: string;
  /** The secret before the last rotation, accepted until `previous_secret_expires_at` (the grace). */
  previous_secret_hash: string | null;
  previous_secret_expires_at: Date | null;
  rotated_at: Date | null;
}

export interface CreateApiKeyInput {
  merchantId: number;
  accountId?: number | null;
  permissions: Permission[];
  ipWhitelist: string[];
  expiresAt?: Date | null;
  hmac?: boolean;
  name?: string;
}

/** Creates a key; the plaintext secret exists only in the returned value. */
export async function createApiKey(db: Database, input: CreateApiKeyInput): Promise<{ key: ApiKeyRow; clientSecret: string }> {
  return db.transaction((tx) => insertApiKey(tx, input));
}

/** createApiKey inside the caller's transaction (src/auth/keyLifecycle.ts adds its event and audit row). */
export async function insertApiKey(tx: Sql, input: CreateApiKeyInput): Promise<{ key: ApiKeyRow; clientSecret: string }> {
  const merchant = await merchants.findMerchant(tx, input.merchantId);
  if (!merchant) throw invalidFields({ merchant_id: ['does not exist'] });
  if (input.accountId != null) {
    const account = await merchants.findAccount(tx, input.accountId);
    if (!account || account.merchant_id !== merchant.id) {
      throw invalidFields({ account_id: ['does not belong to the merchant'] });
    }
  }
  const clientSecret = newSecret('sk_');
  const [key] = await tx.query<ApiKeyRow>(
    `INSERT INTO api_keys (client_id, secret_hash, merchant_id, account_id, permissions, ip_whitelist, hmac_enabled, expires_at, name)
     VALUES ($1, $2, $3, $4, $5::text[], $6::text[], $7, $8, $9) RETURNING *`,
    [
      newClientId(),
      secretDigest(clientSecret),
      merchant.id,
      input.accountId ?? null,
      input.permissions,
      input.ipWhitelist,
      input.hmac ?? true,
      input.expiresAt ?? null,
      input.name ?? '',
    ],
  );
  return { key: key!, clientSecret };
}

export interface ApiKeyPatch {
  permissions?: Permission[];
  ipWhitelist?: string[];
  /** null clears the expiry. */
  expiresAt?: Date | null;
  /** The API Pix client certificate's SHA-256 (hex); null unbinds it. */
  apiPixCertSha256?: string | null;
}

export async function updateApiKey(db: Database, clientId: string, patch: ApiKeyPatch): Promise<ApiKeyRow> {
  const [key] = await db.query<ApiKeyRow>(
    `UPDATE api_keys SET
       permissions = COALESCE($2::text[], permissions),
       ip_whitelist = COALESCE($3::text[], ip_whitelist),
       expires_at = CASE WHEN $4::boolean THEN $5::timestamptz ELSE expires_at END,
       api_pix_cert_sha256 = CASE WHEN $6::boolean THEN $7::text ELSE api_pix_cert_sha256 END,
       updated_at = now()
     WHERE client_id = $1 RETURNING *`,
    [clientId, patch.permissions ?? null, patch.ipWhitelist ?? null, patch.expiresAt !== undefined, patch.expiresAt ?? null, patch.apiPixCertSha256 !== undefined, patch.apiPixCertSha256 ?? null],
  );
  if (!key) throw new DomainError('not_found', { message: 'API key not found' });
  return key;
}

/**
 * What the request pipeline needs to authenticate a call, in one query: the key, and the status of
 * the account it operates on (its own account, or the merchant's first one) and of the merchant.
 */
export interface KeyWithAccount extends ApiKeyRow {
  operating_account_id: number | null;
  account_status: 'active' | 'inactive' | null;
  merchant_status: 'active' | 'inactive';
}

export async function findKeyForAuth(sql: Sql, clientId: string): Promise<KeyWithAccount | undefined> {
  return (await findKeysForAuth(sql, [clientId])).get(clientId);
}

/**
 * The keys of `clientIds` as stage 3 reads them (`findKeyForAuth`), in one statement: the
 * credential cache's look-ups of one moment share it (src/auth/credentialCache.ts). Unknown ids
 * are absent from the map.
 */
export async function findKeysForAuth(sql: Sql, clientIds: readonly string[]): Promise<Map<string, KeyWithAccount>> {
  const rows = await sql.query<KeyWithAccount>(
    `SELECT k.*, a.id AS operating_account_id, a.status AS account_status, m.status AS merchant_status
       FROM api_keys k
       JOIN merchants m ON m.id = k.merchant_id
       LEFT JOIN LATERAL (
         SELECT id, status FROM accounts
          WHERE id = k.account_id OR (k.account_id IS NULL AND merchant_id = k.merchant_id)
          ORDER BY id LIMIT 1
       ) a ON true
      WHERE k.client_id = ANY($1::text[])`,
    [clientIds],
  );
  return new Map(rows.map((row) => [row.client_id, row]));
}

/** The public view of a key (never the secret or its digest). */
export function apiKeyView(key: ApiKeyRow) {
  return {
    client_id: key.client_id,
    merchant_id: key.merchant_id,
    account_id: key.account_id,
    permissions: key.permissions,
    ip_whitelist: key.ip_whitelist,
    hmac: key.hmac_enabled,
    expires_at: key.expires_at ? key.expires_at.toISOString() : null,
    api_pix_certificate_sha256: key.api_pix_cert_sha256 ?? null,
    active: key.active,
    created_at: key.created_at.toISOString(),
  };
}
