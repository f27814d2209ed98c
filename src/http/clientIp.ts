import { isIP } from 'node:net';
import { ipMatches, normalizeIp, type IpRule } from '../lib/ip.js';

/**
 * The client address the whitelist and the rate limiter see. `X-Forwarded-For` is honoured only
 * when the direct peer is a trusted proxy; then the list is walked from the right, skipping trusted
 * proxies, and the first untrusted hop is the client (a client cannot forge its way past a proxy
 * that appends). A malformed hop ends the walk and is returned as given, so it matches nothing.
 */
export function resolveClientIp(peer: string, forwardedFor: string | string[] | undefined, trusted: readonly IpRule[]): string {
  const direct = normalizeIp(peer);
  if (trusted.length === 0 || forwardedFor === undefined) return direct;
  const isTrusted = (ip: string) => trusted.some((r) => ipMatches(r, ip));
  if (!isTrusted(direct)) return direct;
  const hops = (Array.isArray(forwardedFor) ? forwardedFor.join(',') : forwardedFor)
    .split(',')
    .map((h) => h.trim())
    .filter((h) => h !== '');
  let client = direct;
  for (let i = hops.length - 1; i >= 0; i--) {
    const hop = hops[i]!;
    if (isIP(hop) === 0) return hop;
    client = normalizeIp(hop);
    if (!isTrusted(client)) return client;
  }
  return client;
}
