import { createHmac, timingSafeEqual } from 'node:crypto';

/**
 * Request signatures (spec "Request signature" and "Signature version 2"): HMAC-SHA512, key = the
 * API key's client_secret, hex (128 characters; upper case accepted).
 *   v1 signs the canonical body.
 *   v2 signs `v2\n<timestamp>\n<nonce>\n<METHOD>\n<path>\n<idempotency key>\n<canonical body>`.
 */
export function signV1(secret: string, canonicalBody: string): string {
  return createHmac('sha512', secret).update(canonicalBody, 'utf8').digest('hex');
}

export interface V2Parts {
  timestamp: string;
  nonce: string;
  method: string;
  path: string;
  idempotencyKey: string;
  canonicalBody: string;
}

export function v2SigningString(p: V2Parts): string {
  return ['v2', p.timestamp, p.nonce, p.method.toUpperCase(), p.path, p.idempotencyKey, p.canonicalBody].join('\n');
}

export function signV2(secret: string, parts: V2Parts): string {
  return createHmac('sha512', secret).update(v2SigningString(parts), 'utf8').digest('hex');
}

const UNRESERVED = /^[A-Za-z0-9\-._~]$/;

/**
 * The one form of the path that signature v2 covers: the request path without its query string,
 * with percent-encoding normalised (RFC 3986, 6.2.2): an escaped unreserved character
 * (`A-Z a-z 0-9 - . _ ~`) is decoded, every other escape keeps its place with upper-case hex. So
 * `/api/external/pix/cash%2Dout` and `/api/external/pix/%63ash-out` sign as
 * `/api/external/pix/cash-out`, the route the server runs; a client that sends plain paths signs
 * exactly what it sends.
 */
export function signedPath(requestUrl: string): string {
  const path = requestUrl.split('?')[0]!;
  return path.replace(/%([0-9A-Fa-f]{2})/g, (_escape, hex: string) => {
    const char = String.fromCharCode(parseInt(hex, 16));
    return UNRESERVED.test(char) ? char : `%${hex.toUpperCase()}`;
  });
}

/** Constant-time check of a presented hex signature against the expected one. */
export function signatureMatches(presented: string, expectedHex: string): boolean {
  const normalized = presented.trim().toLowerCase();
  if (!/^[0-9a-f]{128}$/.test(normalized)) return false;
  return timingSafeEqual(Buffer.from(normalized, 'hex'), Buffer.from(expectedHex, 'hex'));
}

export const V2 = {
  toleranceSeconds: 300,
  nonce: /^[A-Za-z0-9._~-]{16,128}$/,
  idempotencyKeyMin: 8,
  idempotencyKeyMax: 256,
} as const;
