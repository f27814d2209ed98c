import type { Clock } from '../lib/clock.js';
import type { KeyWithAccount } from './apiKeys.js';
import { digestEquals, secretDigest } from './secrets.js';

export interface PresentedCredentials {
  clientId: string;
  clientSecret: string;
}

/**
 * Reads `Authorization: ApiKey <client_id>:<client_secret>` or `Basic <base64(client_id:client_secret)>`
 * (scheme names case-insensitive). Returns null when no API-key credentials are present at all,
 * 'malformed' when the scheme is right but the value is not `id:secret`.
 */
export function parseAuthorization(header: string | undefined): PresentedCredentials | null | 'malformed' {
  if (!header) return null;
  const match = /^\s*(ApiKey|Basic)\s+(\S+)\s*$/i.exec(header);
  if (!match) return null;
  let pair = match[2]!;
  if (match[1]!.toLowerCase() === 'basic') {
    if (!/^[A-Za-z0-9+/]+={0,2}$/.test(pair)) return 'malformed';
    pair = Buffer.from(pair, 'base64').toString('utf8');
  }
  const colon = pair.indexOf(':');
  if (colon <= 0 || colon === pair.length - 1) return 'malformed';
  return { clientId: pair.slice(0, colon), clientSecret: pair.slice(colon + 1) };
}

export interface Authenticated {
  key: KeyWithAccount;
  /** The secret presented in this request: the HMAC key of its signature. */
  clientSecret: string;
}

/**
 * Why credentials were refused (each is a 401 of the spec's shape 1; the edge writes it:
 * src/http/errors.ts `credentialsRefused`). The names are those of SHAPE1's messages.
 */
export type CredentialRefusal = 'missingCredentials' | 'invalidCredentials' | 'inactiveKey' | 'expiredKey';

/** Reads a key as stage 3 needs it: `ctx.credentials.apiKey` (cached) or `findKeyForAuth`. */
export type KeyLookup = (clientId: string) => Promise<KeyWithAccount | undefined>;

/**
 * Stage 3 of the pipeline. One query at most (none when the key is cached); the secret's digest is compared in constant time before
 * anything about the key (revoked, expired) is revealed.
 */
export async function authenticate(findKey: KeyLookup, clock: Clock, header: string | undefined): Promise<Authenticated | { refused: CredentialRefusal }> {
  const presented = parseAuthorization(header);
  if (presented === null) return { refused: 'missingCredentials' };
  if (presented === 'malformed' || presented.clientId.length > 100 || presented.clientSecret.length > 200) {
    return { refused: 'invalidCredentials' };
  }
  const key = /^cli_[A-Za-z0-9]+$/.test(presented.clientId) ? await findKey(presented.clientId) : undefined;
  // Hash even when the key does not exist, so timing does not tell the two cases apart.
  const digest = secretDigest(presented.clientSecret);
  if (!key || !secretMatches(key, digest, clock.now())) return { refused: 'invalidCredentials' };
  if (!key.active) return { refused: 'inactiveKey' };
  if (key.expires_at && key.expires_at.getTime() <= clock.now().getTime()) return { refused: 'expiredKey' };
  return { key, clientSecret: presented.clientSecret };
}

/**
 * The presented secret's digest is the key's secret, or its previous secret while the rotation's
 * grace lasts (`previous_secret_expires_at`, checked against the clock on every request, so the
 * end of the grace needs no cache invalidation). Both compares always run (constant time).
 */
export function secretMatches(key: Pick<KeyWithAccount, 'secret_hash' | 'previous_secret_hash' | 'previous_secret_expires_at'>, digest: string, now: Date): boolean {
  const current = digestEquals(digest, key.secret_hash);
  const previous = key.previous_secret_hash !== null && digestEquals(digest, key.previous_secret_hash);
  const inGrace = key.previous_secret_expires_at !== null && key.previous_secret_expires_at.getTime() > now.getTime();
  return current || (previous && inGrace);
}
