import { Secret, TOTP } from 'otpauth';

/**
 * TOTP second factor (RFC 6238: SHA-1, 6 digits, 30 s), one module for every sign-in of the
 * platform (portal members now, console operators later). A code is accepted one step either side
 * of the clock (clock drift), and a step is accepted once: the caller stores the step returned and
 * passes it back as `lastStep` (a code seen once cannot be replayed within its window).
 */
export const TOTP_PERIOD_SECONDS = 30;
const DIGITS = 6;
const WINDOW = 1;

/** A new random secret (160 bits), base32 as authenticator apps take it. */
export function newTotpSecret(): string {
  return new Secret({ size: 20 }).base32;
}

function totp(secretBase32: string, label = 'pixgate', issuer = 'pixgate'): TOTP {
  return new TOTP({ issuer, label, algorithm: 'SHA1', digits: DIGITS, period: TOTP_PERIOD_SECONDS, secret: Secret.fromBase32(secretBase32) });
}

/** The `otpauth://` URI an authenticator app reads (as a QR code or pasted). */
export function totpUri(secretBase32: string, account: string, issuer = 'pixgate'): string {
  return totp(secretBase32, account, issuer).toString();
}

/** The code of `at` (tests, and nothing else in the server). */
export function totpCode(secretBase32: string, at: Date): string {
  return totp(secretBase32).generate({ timestamp: at.getTime() });
}

/**
 * The time step a code belongs to when it is valid at `at` and newer than `lastStep`; null
 * otherwise (wrong, too old, malformed or replayed).
 */
export function verifyTotp(secretBase32: string, code: string, at: Date, lastStep: number | null): number | null {
  const token = code.replace(/\s+/g, '');
  if (!/^\d{6}$/.test(token)) return null;
  const delta = totp(secretBase32).validate({ token, timestamp: at.getTime(), window: WINDOW });
  if (delta === null) return null;
  const step = Math.floor(at.getTime() / 1000 / TOTP_PERIOD_SECONDS) + delta;
  if (lastStep !== null && step <= lastStep) return null;
  return step;
}
