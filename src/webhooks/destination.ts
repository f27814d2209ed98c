import { isIPv4, isIPv6 } from 'node:net';
import { ipv4ToString, parseIpv4, parseIpv6 } from '../lib/ip.js';

/**
 * Where a webhook may point (SSRF rules). A destination is refused when its host is, or resolves to,
 * an address that is not a public unicast address, or when its name is one that only means something
 * inside a network. The spec's list (localhost, 127/8, 10/8, 192.168/16, 172.16/12, `.local`,
 * `.internal`) is extended with every other special-purpose range of the IANA registries.
 * `WEBHOOK_ALLOWED_HOSTS` (operator setting) is the only exemption.
 *
 * Registration checks the URL's host as written (after WHATWG URL parsing, which already turns
 * `2130706433`, `0x7f.1`, `017700000001` and `127.1` into `127.0.0.1`); delivery checks every
 * address the name resolves to, at connection time (DNS rebinding).
 */

interface Range {
  network: bigint;
  prefix: number;
  label: string;
}

function v4(cidr: string, label: string): Range {
  const [addr, prefix] = cidr.split('/');
  return { network: parseIpv4(addr!)!, prefix: Number(prefix), label };
}

function v6(cidr: string, label: string): Range {
  const [addr, prefix] = cidr.split('/');
  return { network: parseIpv6(addr!)!, prefix: Number(prefix), label };
}

const IPV4_BLOCKED: readonly Range[] = [
  v4('0.0.0.0/8', 'this network'),
  v4('10.0.0.0/8', 'private network'),
  v4('100.64.0.0/10', 'shared address space'),
  v4('127.0.0.0/8', 'loopback'),
  v4('169.254.0.0/16', 'link-local'),
  v4('172.16.0.0/12', 'private network'),
  v4('192.0.0.0/24', 'IETF protocol assignments'),
  v4('192.0.2.0/24', 'documentation'),
  v4('192.88.99.0/24', '6to4 relay anycast'),
  v4('192.168.0.0/16', 'private network'),
  v4('198.18.0.0/15', 'benchmarking'),
  v4('198.51.100.0/24', 'documentation'),
  v4('203.0.113.0/24', 'documentation'),
  v4('224.0.0.0/4', 'multicast'),
  v4('240.0.0.0/4', 'reserved'),
];

/** IPv6 ranges refused outright. Ranges that embed an IPv4 address are handled in ipv6Problem. */
const IPV6_BLOCKED: readonly Range[] = [
  v6('::/128', 'unspecified'),
  v6('::1/128', 'loopback'),
  v6('::/96', 'IPv4-compatible'),
  v6('64:ff9b:1::/48', 'local-use NAT64'),
  v6('100::/64', 'discard-only'),
  v6('2001::/32', 'Teredo'),
  v6('2001:db8::/32', 'documentation'),
  v6('3fff::/20', 'documentation'),
  v6('5f00::/16', 'segment routing'),
  v6('fc00::/7', 'unique-local'),
  v6('fe80::/10', 'link-local'),
  v6('fec0::/10', 'site-local'),
  v6('ff00::/8', 'multicast'),
];

function inRange(value: bigint, bits: number, range: Range): boolean {
  const shift = BigInt(bits - range.prefix);
  return value >> shift === range.network >> shift;
}

function ipv4Problem(value: bigint): string | null {
  for (const range of IPV4_BLOCKED) if (inRange(value, 32, range)) return range.label;
  return null;
}

function ipv6Problem(value: bigint): string | null {
  const low32 = value & 0xffffffffn;
  // Forms that carry an IPv4 address: judged by the address they lead to.
  if (value >> 32n === 0xffffn) return embedded('IPv4-mapped', low32); // ::ffff:a.b.c.d
  if (value >> 32n === 0xffff0000n) return embedded('IPv4-translated', low32); // ::ffff:0:a.b.c.d
  if (value >> 32n === 0x64ff9b0000000000000000n) return embedded('NAT64', low32); // 64:ff9b::a.b.c.d
  if (value >> 112n === 0x2002n) return embedded('6to4', (value >> 80n) & 0xffffffffn); // 2002:aabb:ccdd::
  for (const range of IPV6_BLOCKED) if (inRange(value, 128, range)) return range.label;
  return null;
}

function embedded(form: string, address: bigint): string | null {
  const problem = ipv4Problem(address);
  return problem === null ? null : `${form} ${ipv4ToString(address)}, ${problem}`;
}

/**
 * Legacy IPv4 notations (inet_aton: 1 to 4 parts, each decimal, octal with a leading 0, or hex with
 * 0x; the last part fills the remaining bytes). WHATWG URL parsing normalizes these already; this
 * covers hosts that reach us by another path (DNS answers, allowed-host entries).
 */
export function parseLegacyIpv4(text: string): bigint | null {
  const parts = text.split('.');
  if (text.endsWith('.')) parts.pop(); // `127.0.0.1.` is the same address
  if (parts.length < 1 || parts.length > 4) return null;
  const values: bigint[] = [];
  for (const part of parts) {
    let v: bigint;
    if (/^0x[0-9a-f]*$/i.test(part)) v = part.length === 2 ? 0n : BigInt(part);
    else if (/^0[0-7]+$/.test(part)) v = BigInt(`0o${part.slice(1)}`);
    else if (/^(0|[1-9]\d*)$/.test(part)) v = BigInt(part);
    else return null;
    values.push(v);
  }
  const last = values.pop()!;
  if (values.some((v) => v > 255n)) return null;
  const lastBits = BigInt(8 * (4 - values.length));
  if (last >= 1n << lastBits) return null;
  return values.reduce((acc, v, i) => acc | (v << BigInt(24 - 8 * i)), 0n) | last;
}

/** Why an IP address (any notation, with or without brackets) is not a public destination; null when it is. */
export function addressProblem(address: string): string | null {
  const text = address.startsWith('[') && address.endsWith(']') ? address.slice(1, -1) : address;
  if (isIPv6(text)) {
    const value = parseIpv6(text.split('%')[0]!);
    return value === null ? 'unparseable IPv6 address' : ipv6Problem(value);
  }
  const value = isIPv4(text) ? parseIpv4(text) ?? parseLegacyIpv4(text) : parseLegacyIpv4(text);
  return value === null ? null : ipv4Problem(value);
}

/** Names that only mean something inside a network. */
const LOCAL_SUFFIXES = ['.localhost', '.local', '.internal', '.home.arpa', '.localdomain'];

/**
 * Why a URL host (as `URL.hostname` gives it) is not a public destination, judged without DNS; null
 * when it may be one. IP literals are checked against the ranges; names against the local suffixes,
 * and a name without a dot (`intranet`, `redis`) is refused since only search domains can resolve it.
 */
export function hostProblem(hostname: string): string | null {
  const host = normalizeHost(hostname);
  if (host === '') return 'empty host';
  if (!host.startsWith('[') && host.split('.').some((label) => label === '')) return 'empty label in the name';
  if (host.startsWith('[') || isIPv4(host) || parseLegacyIpv4(host) !== null) return addressProblem(host);
  if (host === 'localhost') return 'localhost';
  for (const suffix of LOCAL_SUFFIXES) if (host.endsWith(suffix) || host === suffix.slice(1)) return `${suffix} name`;
  if (!host.includes('.')) return 'single-label name';
  return null;
}

/**
 * A URL host in the one form every check compares: lower case, without the trailing dots of a
 * fully qualified name (`printer.local..` is `printer.local`).
 */
export function normalizeHost(hostname: string): string {
  return hostname.toLowerCase().replace(/\.+$/, '');
}

/** An entry of WEBHOOK_ALLOWED_HOSTS: a host at any port, or at one port. */
export interface AllowedHost {
  hostname: string;
  port: string | null;
}

/**
 * Parses the configured entries (`host` or `host:port`, IPv6 in brackets) into the form URL parsing
 * gives, so `127.0.0.1`, `2130706433` and `0x7f.1` name the same host.
 */
export function parseAllowedHosts(entries: readonly string[]): AllowedHost[] {
  return entries.map((entry) => {
    const bare = isIPv6(entry) ? `[${entry}]` : entry;
    const url = new URL(`http://${bare}`);
    const explicitPort = /:(\d+)$/.test(bare) && !bare.endsWith(']');
    return { hostname: normalizeHost(url.hostname), port: explicitPort ? (url.port === '' ? '80' : url.port) : null };
  });
}

function effectivePort(url: URL): string {
  if (url.port !== '') return url.port;
  return url.protocol === 'https:' ? '443' : '80';
}

export function isAllowedHost(allowed: readonly AllowedHost[], url: URL): boolean {
  const hostname = normalizeHost(url.hostname);
  const port = effectivePort(url);
  return allowed.some((a) => a.hostname === hostname && (a.port === null || a.port === port));
}

/** Why the URL's destination is refused (null when it is acceptable or exempt), judged without DNS. */
export function destinationProblem(url: URL, allowed: readonly AllowedHost[]): string | null {
  if (isAllowedHost(allowed, url)) return null;
  return hostProblem(url.hostname);
}
