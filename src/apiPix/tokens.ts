import type { KeyWithAccount } from '../auth/apiKeys.js';
import { whitelistAllows } from '../auth/ipWhitelist.js';
import { secretDigest } from '../auth/secrets.js';
import type { Database } from '../db/db.js';
import type { Clock } from '../lib/clock.js';
import { newSecret } from '../lib/ids.js';
import { isScope, SCOPE_PERMISSION, type Scope } from './scopes.js';
import * as store from './tokenStore.js';

/**
 * Access tokens of the API Pix façade (OAuth2 client credentials, RFC 6749 §4.4, bearer use RFC
 * 6750). A token is a 256-bit random value shown once; the database keeps its SHA-256 digest, the
 * key it was granted to, its scopes and its expiry. It lends no rights of its own: each call reads
 * the key again through the credential cache (src/auth/credentialCache.ts, invalidated in every
 * process by migration 0610's triggers), so a key revoked, disabled, expired, moved to an inactive
 * account or stripped of the permission behind a scope stops its tokens at the next call.
 */
export const TOKEN = {
  prefix: 'pxa_',
  ttlSeconds: 600,
  /** Live tokens kept per key: a grant past it retires the oldest. */
  maxLivePerKey: 50,
} as const;

export interface TokenDeps {
  db: Database;
  clock: Clock;
}

export interface GrantedToken {
  accessToken: string;
  expiresIn: number;
  scopes: Scope[];
}

/** Grants a token to an authenticated key (the edge checked the secret, the key and its address). */
export async function grantToken(deps: TokenDeps, key: KeyWithAccount, scopes: Scope[], certSha256: string | null): Promise<GrantedToken> {
  const accessToken = newSecret(TOKEN.prefix);
  const issuedAt = deps.clock.now();
  await deps.db.transaction(async (tx) => {
    await store.insertToken(tx, {
      token_hash: secretDigest(accessToken),
      client_id: key.client_id,
      scopes,
      cert_sha256: certSha256,
      issued_at: issuedAt,
      expires_at: new Date(issuedAt.getTime() + TOKEN.ttlSeconds * 1000),
    });
    await store.pruneTokens(tx, key.client_id, issuedAt, TOKEN.maxLivePerKey);
  });
  return { accessToken, expiresIn: TOKEN.ttlSeconds, scopes };
}

/**
 * Mutual TLS at the grant: a key with a bound certificate is granted tokens only over a connection
 * presenting it; with TLS configured outside local mode, a key must have one bound.
 */
export function certificateRefusal(key: KeyWithAccount, presented: string | null, mutualTlsRequired: boolean): 'certificate_mismatch' | 'certificate_required' | undefined {
  if (key.api_pix_cert_sha256) return key.api_pix_cert_sha256 === presented ? undefined : 'certificate_mismatch';
  return mutualTlsRequired ? 'certificate_required' : undefined;
}

/** Why a key may not act now (the grant and every call check the same). */
export type KeyRefusal = 'inactive_key' | 'expired_key' | 'address_not_allowed' | 'account_inactive';

export function keyRefusal(key: KeyWithAccount, clientIp: string, now: Date): KeyRefusal | undefined {
  if (!key.active) return 'inactive_key';
  if (key.expires_at && key.expires_at.getTime() <= now.getTime()) return 'expired_key';
  if (key.ip_whitelist.length === 0 || !whitelistAllows(key.ip_whitelist, clientIp)) return 'address_not_allowed';
  if (key.operating_account_id === null || key.account_status !== 'active' || key.merchant_status !== 'active') return 'account_inactive';
  return undefined;
}

/** The caller of a façade operation. */
export interface PixCaller {
  clientId: string;
  merchantId: number;
  accountId: number;
  scopes: readonly Scope[];
}

export type BearerResult = { caller: PixCaller } | { refused: 'invalid_token' | KeyRefusal };

export interface BearerPresented {
  token: string;
  clientIp: string;
  /** SHA-256 of the client certificate of this connection (mutual TLS), when there is one. */
  certSha256: string | null;
}

/**
 * The caller a bearer token stands for, or why it stands for none. Unknown, expired and malformed
 * tokens are all `invalid_token`; a token granted over a client certificate is only good on a
 * connection with that certificate (RFC 8705 §3). A scope whose permission the key lost since the
 * grant is dropped from the caller's scopes.
 */
export async function authenticateBearer(deps: TokenDeps, findKey: (clientId: string) => Promise<KeyWithAccount | undefined>, presented: BearerPresented): Promise<BearerResult> {
  const { token } = presented;
  if (!token.startsWith(TOKEN.prefix) || token.length > 100) return { refused: 'invalid_token' };
  const row = await store.findToken(deps.db, secretDigest(token));
  const now = deps.clock.now();
  if (!row || row.expires_at.getTime() <= now.getTime()) return { refused: 'invalid_token' };
  if (row.cert_sha256 !== null && row.cert_sha256 !== presented.certSha256) return { refused: 'invalid_token' };
  const key = await findKey(row.client_id);
  if (!key) return { refused: 'invalid_token' };
  // A certificate bound to the key since the grant (or another one) binds its tokens too.
  if (key.api_pix_cert_sha256 && key.api_pix_cert_sha256 !== presented.certSha256) return { refused: 'invalid_token' };
  const refusal = keyRefusal(key, presented.clientIp, now);
  if (refusal) return { refused: refusal };
  const scopes = row.scopes.filter(isScope).filter((s) => key.permissions.includes(SCOPE_PERMISSION[s]));
  return { caller: { clientId: key.client_id, merchantId: key.merchant_id, accountId: key.operating_account_id!, scopes } };
}
