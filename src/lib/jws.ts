import { createPublicKey, generateKeyPairSync, randomBytes, sign, type KeyObject } from 'node:crypto';

/**
 * Compact JWS (RFC 7515) signed with RS256, and the JWK Set (RFC 7517) that verifies it: what the
 * API Pix payload locations serve (`application/jose`). A signer holds one RSA key pair; `kid`
 * names it in the header and the set.
 */
export interface JwsSigner {
  kid: string;
  sign(payload: unknown, extraHeader?: Record<string, unknown>): string;
  jwks(): { keys: Array<Record<string, unknown>> };
}

export function rsaJwsSigner(privateKey?: KeyObject, keyId?: string): JwsSigner {
  const key = privateKey ?? generateKeyPairSync('rsa', { modulusLength: 2048 }).privateKey;
  const publicJwk = createPublicKey(key).export({ format: 'jwk' });
  const kid = keyId ?? randomBytes(8).toString('hex');
  return {
    kid,
    sign(payload, extraHeader = {}) {
      const header = Buffer.from(JSON.stringify({ alg: 'RS256', kid, ...extraHeader })).toString('base64url');
      const body = Buffer.from(JSON.stringify(payload)).toString('base64url');
      const signature = sign('sha256', Buffer.from(`${header}.${body}`), key).toString('base64url');
      return `${header}.${body}.${signature}`;
    },
    jwks() {
      return { keys: [{ ...publicJwk, kid, use: 'sig', alg: 'RS256' }] };
    },
  };
}
