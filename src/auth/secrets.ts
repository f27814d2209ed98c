import { createHash, timingSafeEqual } from 'node:crypto';

/**
 * Digest under which API secrets are stored: SHA-256, hex. Secrets are 256-bit random values, so a
 * fast hash is enough (nothing to brute-force) and costs microseconds per request; a slow password
 * hash would cost milliseconds on every call. See docs/decisions.md.
 */
export function secretDigest(secret: string): string {
  return createHash('sha256').update(secret, 'utf8').digest('hex');
}

/** Constant-time equality of two hex digests of the same algorithm. */
export function digestEquals(aHex: string, bHex: string): boolean {
  const a = Buffer.from(aHex, 'hex');
  const b = Buffer.from(bHex, 'hex');
  return a.length === b.length && a.length > 0 && timingSafeEqual(a, b);
}

/** Constant-time comparison of two strings of any length (length leaks, content does not). */
export function constantTimeEqual(a: string, b: string): boolean {
  const ha = createHash('sha256').update(a).digest();
  const hb = createHash('sha256').update(b).digest();
  return timingSafeEqual(ha, hb) && a.length === b.length;
}
