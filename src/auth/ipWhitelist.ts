import { isIPv6 } from 'node:net';
import { ipMatches, normalizeIp, parseIpv4, parseStrictIpv4Cidr } from '../lib/ip.js';

/**
 * API-key IP whitelist, as the spec rules it:
 *  - IPv4 entries match as exact strings: dotted decimal without leading zeros or spaces;
 *  - IPv4 CIDR `a.b.c.d/n` (n 0..32, no host bits set; a wrong mask never matches);
 *  - IPv6 as a full address (no prefix), compared in canonical form;
 *  - the client address `::ffff:a.b.c.d` is normalized to IPv4 first.
 * Entries that fit none of these are kept but never match.
 */
export type WhitelistEntry =
  | { kind: 'ipv4'; address: string }
  | { kind: 'ipv4-cidr'; rule: NonNullable<ReturnType<typeof parseStrictIpv4Cidr>> }
  | { kind: 'ipv6'; address: string };

export function parseWhitelistEntry(entry: string): WhitelistEntry | null {
  if (parseIpv4(entry) !== null) return { kind: 'ipv4', address: entry };
  const cidr = parseStrictIpv4Cidr(entry);
  if (cidr) return { kind: 'ipv4-cidr', rule: cidr };
  if (entry === entry.trim() && !entry.includes('/') && isIPv6(entry)) {
    const normalized = normalizeIp(entry);
    return parseIpv4(normalized) !== null ? { kind: 'ipv4', address: normalized } : { kind: 'ipv6', address: normalized };
  }
  return null;
}

/** Parsed entries by the list they came from: a cached key row's list is parsed once, not per request. */
const parsedLists = new WeakMap<readonly string[], WhitelistEntry[]>();

function parsedEntries(entries: readonly string[]): WhitelistEntry[] {
  let parsed = parsedLists.get(entries);
  if (!parsed) {
    parsed = entries.map(parseWhitelistEntry).filter((e): e is WhitelistEntry => e !== null);
    parsedLists.set(entries, parsed);
  }
  return parsed;
}

export function whitelistAllows(entries: readonly string[], clientIp: string): boolean {
  const ip = normalizeIp(clientIp);
  for (const entry of parsedEntries(entries)) {
    if (entry.kind === 'ipv4-cidr' ? ipMatches(entry.rule, ip) : entry.address === ip) return true;
  }
  return false;
}

/** Human-readable notes on entries that can never match. */
export function whitelistWarnings(entries: readonly string[]): string[] {
  return entries
    .filter((e) => parseWhitelistEntry(e) === null)
    .map((e) => `ip_whitelist entry "${e}" is not a canonical IPv4 address, IPv4 CIDR or IPv6 address and will never match`);
}
