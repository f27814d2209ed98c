import { randomBytes, randomInt, randomUUID } from 'node:crypto';

const ALNUM = 'ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789';

/** `n` random characters from A-Z and 0-9 (uniform, from the CSPRNG). */
export function randomAlnum(n: number): string {
  let out = '';
  for (let i = 0; i < n; i++) out += ALNUM[randomInt(ALNUM.length)];
  return out;
}

/** `yyyyMMddHHmm` of a date in UTC. */
export function utcMinuteStamp(date: Date): string {
  return date.toISOString().replace(/[-:T]/g, '').slice(0, 12);
}

/**
 * End-to-end id (contract section 2): `E` (payment) or `D` (return) + ISPB (8 digits) +
 * `yyyyMMddHHmm` UTC + 11 alphanumerics = 32 characters.
 */
export function newEndToEndId(kind: 'E' | 'D', ispb: string, now: Date): string {
  return `${kind}${ispb}${utcMinuteStamp(now)}${randomAlnum(11)}`;
}

export const END_TO_END_ID = /^[ED]\d{8}\d{12}[A-Za-z0-9]{11}$/;

/** Prefixes of public transaction ids. PIXOUT and PIXRET are the spec's; the rest are ours. */
export const TX_PREFIX = {
  cashOut: 'PIXOUT',
  refund: 'PIXRET',
  inbound: 'PIXIN',
  charge: 'PIXCHG',
  payoutReturn: 'PIXDEV',
  deposit: 'DEP',
  boletoSettlement: 'BOLSET',
  medRefund: 'MEDRET',
} as const;

/** Public transaction id: prefix + `yyyyMMddHHmmss` UTC + 10 random alphanumerics (sortable by time). */
export function newTransactionId(prefix: string, now: Date): string {
  const stamp = now.toISOString().replace(/[-:T]/g, '').slice(0, 14);
  return `${prefix}${stamp}${randomAlnum(10)}`;
}

/** API-key client id: `cli_` + 24 base62-ish characters (not secret). */
export function newClientId(): string {
  return `cli_${randomBytes(18).toString('base64url').replace(/[-_]/g, 'x')}`;
}

/** A 256-bit secret, base64url, behind the given prefix (`sk_` for API keys). */
export function newSecret(prefix: string): string {
  return `${prefix}${randomBytes(32).toString('base64url')}`;
}

export function newUuid(): string {
  return randomUUID();
}

export const UUID_V4 = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/i;
