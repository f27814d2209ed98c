import { isIPv4, isIPv6 } from 'node:net';

/** An address or network: `prefix` is 32 (IPv4) or 128 (IPv6) for a single host. */
export interface IpRule {
  family: 4 | 6;
  network: bigint;
  prefix: number;
  text: string;
}

const IPV4_STRICT = /^(25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)(\.(25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)){3}$/;

/** Dotted-decimal IPv4 without leading zeros, spaces or anything else; null otherwise. */
export function parseIpv4(text: string): bigint | null {
  if (!IPV4_STRICT.test(text)) return null;
  return text.split('.').reduce((acc, part) => (acc << 8n) | BigInt(Number(part)), 0n);
}

export function ipv4ToString(value: bigint): string {
  return [24n, 16n, 8n, 0n].map((shift) => String((value >> shift) & 255n)).join('.');
}

/** Any IPv6 notation Node accepts (including an embedded IPv4 tail) as a 128-bit integer; null otherwise. */
export function parseIpv6(text: string): bigint | null {
  if (!isIPv6(text)) return null;
  let head = text;
  let tailWords: number[] = [];
  const lastColon = head.lastIndexOf(':');
  const tail = head.slice(lastColon + 1);
  if (tail.includes('.')) {
    const v4 = parseIpv4(tail);
    if (v4 === null) return null;
    tailWords = [Number(v4 >> 16n), Number(v4 & 0xffffn)];
    head = head.slice(0, lastColon + 1) + '0'; // placeholder word, removed below
  }
  const halves = head.split('::');
  if (halves.length > 2) return null;
  const words = (part: string) => (part === '' ? [] : part.split(':').map((w) => parseInt(w, 16)));
  let left = words(halves[0] ?? '');
  let right = halves.length === 2 ? words(halves[1] ?? '') : [];
  if (tailWords.length > 0) {
    if (halves.length === 2) right = [...right.slice(0, -1), ...tailWords];
    else left = [...left.slice(0, -1), ...tailWords];
  }
  const missing = 8 - left.length - right.length;
  if (halves.length === 1 && missing !== 0) return null;
  if (missing < 0) return null;
  const all = [...left, ...new Array<number>(halves.length === 2 ? missing : 0).fill(0), ...right];
  if (all.length !== 8 || all.some((w) => !Number.isInteger(w) || w < 0 || w > 0xffff)) return null;
  return all.reduce((acc, w) => (acc << 16n) | BigInt(w), 0n);
}

const MAPPED_PREFIX = 0xffffn << 32n;

/**
 * The form a client address is compared in: an IPv4-mapped IPv6 address (`::ffff:a.b.c.d`, as a
 * dual-stack listener reports IPv4 peers) becomes plain IPv4; other IPv6 addresses take their
 * canonical compressed form (RFC 5952, as `new URL` prints them).
 */
export function normalizeIp(address: string): string {
  const text = address.trim();
  if (isIPv4(text)) return text;
  const v6 = parseIpv6(text);
  if (v6 === null) return text;
  if (v6 >> 32n === MAPPED_PREFIX >> 32n) return ipv4ToString(v6 & 0xffffffffn);
  return new URL(`http://[${text}]`).hostname.slice(1, -1);
}

/** Lenient rule parser for operator settings (TRUSTED_PROXIES): IPv4/IPv6 address or CIDR. */
export function parseIpRule(text: string): IpRule | null {
  const [addr, mask, extra] = text.trim().split('/');
  if (addr === undefined || extra !== undefined) return null;
  const normalized = normalizeIp(addr);
  const v4 = parseIpv4(normalized);
  const family: 4 | 6 = v4 !== null ? 4 : 6;
  const value = v4 ?? parseIpv6(normalized);
  if (value === null) return null;
  const bits = family === 4 ? 32 : 128;
  let prefix = bits;
  if (mask !== undefined) {
    if (!/^\d{1,3}$/.test(mask)) return null;
    prefix = Number(mask);
    if (prefix > bits) return null;
  }
  return { family, network: value & prefixMask(prefix, bits), prefix, text };
}

function prefixMask(prefix: number, bits: number): bigint {
  const all = (1n << BigInt(bits)) - 1n;
  return prefix === 0 ? 0n : (all >> BigInt(bits - prefix)) << BigInt(bits - prefix);
}

/** Does the (normalized) address fall inside the rule? */
export function ipMatches(rule: IpRule, address: string): boolean {
  const normalized = normalizeIp(address);
  const value = rule.family === 4 ? parseIpv4(normalized) : parseIpv6(normalized);
  if (value === null) return false;
  const bits = rule.family === 4 ? 32 : 128;
  return (value & prefixMask(rule.prefix, bits)) === rule.network;
}

/**
 * Strict CIDR for API-key whitelists: `a.b.c.d/n` with a canonical address, 0 <= n <= 32 without
 * leading zeros, and no host bits set (`10.0.0.1/24` is a wrong mask). Null when the entry is not
 * such a CIDR.
 */
export function parseStrictIpv4Cidr(entry: string): IpRule | null {
  const match = /^([^/]+)\/(0|[1-9]\d?)$/.exec(entry);
  if (match === null) return null;
  const addr = parseIpv4(match[1] ?? '');
  const prefix = Number(match[2]);
  if (addr === null || prefix > 32) return null;
  const network = addr & prefixMask(prefix, 32);
  if (network !== addr) return null;
  return { family: 4, network, prefix, text: entry };
}
