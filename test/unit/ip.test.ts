import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { parseWhitelistEntry, whitelistAllows } from '../../src/auth/ipWhitelist.js';
import { resolveClientIp } from '../../src/http/clientIp.js';
import { ipMatches, ipv4ToString, normalizeIp, parseIpRule, parseIpv4, parseIpv6, parseStrictIpv4Cidr } from '../../src/lib/ip.js';

describe('IP parsing', () => {
  it('IPv4 strictly: no leading zeros, spaces or out-of-range octets', () => {
    expect(parseIpv4('10.0.0.1')).toBe(0x0a000001n);
    for (const bad of ['010.0.0.1', '10.0.0.01', ' 10.0.0.1', '10.0.0.1 ', '256.0.0.1', '10.0.0', '10.0.0.1.2', '1e1.0.0.1']) {
      expect(parseIpv4(bad), bad).toBeNull();
    }
  });

  it('IPv4 round-trips (property)', () => {
    fc.assert(fc.property(fc.ipV4(), (ip) => {
      expect(ipv4ToString(parseIpv4(ip)!)).toBe(ip);
    }));
  });

  it('IPv6 in any notation, including an embedded IPv4 tail', () => {
    expect(parseIpv6('::1')).toBe(1n);
    expect(parseIpv6('0:0:0:0:0:0:0:1')).toBe(1n);
    expect(parseIpv6('::ffff:127.0.0.1')).toBe((0xffffn << 32n) | 0x7f000001n);
    expect(parseIpv6('fe80::1:2')).toBe((0xfe80n << 112n) | (1n << 16n) | 2n);
    expect(parseIpv6('1::2::3')).toBeNull();
    expect(parseIpv6('12345::')).toBeNull();
  });

  it('normalizes IPv4-mapped IPv6 to IPv4 and IPv6 to canonical form', () => {
    expect(normalizeIp('::ffff:192.168.0.1')).toBe('192.168.0.1');
    expect(normalizeIp('::FFFF:c0a8:1')).toBe('192.168.0.1');
    expect(normalizeIp('0:0:0:0:0:0:0:1')).toBe('::1');
    expect(normalizeIp('2001:DB8:0:0:0:0:0:1')).toBe('2001:db8::1');
  });

  it('IPv6 canonical form is stable (property)', () => {
    fc.assert(fc.property(fc.ipV6(), (ip) => {
      expect(normalizeIp(normalizeIp(ip))).toBe(normalizeIp(ip));
      expect(parseIpv6(normalizeIp(ip)) ?? parseIpv4(normalizeIp(ip))).not.toBeNull();
    }));
  });

  it('strict IPv4 CIDR refuses wrong masks', () => {
    expect(parseStrictIpv4Cidr('10.0.0.0/8')).not.toBeNull();
    expect(parseStrictIpv4Cidr('0.0.0.0/0')).not.toBeNull();
    for (const bad of ['10.0.0.1/8', '10.0.0.0/33', '10.0.0.0/08', '10.0.0.0/', '10.0.0.0/255.0.0.0', '010.0.0.0/8']) {
      expect(parseStrictIpv4Cidr(bad), bad).toBeNull();
    }
  });

  it('CIDR membership (property): an address is in its own /n network', () => {
    fc.assert(
      fc.property(fc.ipV4(), fc.integer({ min: 0, max: 32 }), (ip, prefix) => {
        const rule = parseIpRule(`${ip}/${prefix}`)!;
        expect(ipMatches(rule, ip)).toBe(true);
        return true;
      }),
    );
  });
});

describe('whitelist', () => {
  it('classifies entries', () => {
    expect(parseWhitelistEntry('1.2.3.4')).toEqual({ kind: 'ipv4', address: '1.2.3.4' });
    expect(parseWhitelistEntry('::1')).toEqual({ kind: 'ipv6', address: '::1' });
    expect(parseWhitelistEntry('::ffff:1.2.3.4')).toEqual({ kind: 'ipv4', address: '1.2.3.4' });
    expect(parseWhitelistEntry('1.2.3.0/24')?.kind).toBe('ipv4-cidr');
    for (const never of ['01.2.3.4', ' 1.2.3.4', '1.2.3.4/33', '::1/128', 'localhost', '']) expect(parseWhitelistEntry(never), never).toBeNull();
  });

  it('allows listed addresses only', () => {
    expect(whitelistAllows(['1.2.3.4'], '1.2.3.4')).toBe(true);
    expect(whitelistAllows(['1.2.3.4'], '::ffff:1.2.3.4')).toBe(true);
    expect(whitelistAllows(['1.2.3.0/24'], '1.2.3.200')).toBe(true);
    expect(whitelistAllows(['1.2.3.0/24'], '1.2.4.1')).toBe(false);
    expect(whitelistAllows(['2001:db8::1'], '2001:0db8:0:0:0:0:0:1')).toBe(true);
    expect(whitelistAllows([], '1.2.3.4')).toBe(false);
  });
});

describe('client IP behind proxies', () => {
  const trusted = ['10.0.0.0/8', '::1'].map((r) => parseIpRule(r)!);

  it('ignores X-Forwarded-For from an untrusted peer', () => {
    expect(resolveClientIp('203.0.113.5', '1.1.1.1', trusted)).toBe('203.0.113.5');
    expect(resolveClientIp('203.0.113.5', '1.1.1.1', [])).toBe('203.0.113.5');
  });

  it('takes the right-most untrusted hop from a trusted peer', () => {
    expect(resolveClientIp('10.0.0.2', '6.6.6.6, 198.51.100.1, 10.0.0.9', trusted)).toBe('198.51.100.1');
    expect(resolveClientIp('::ffff:10.0.0.2', '198.51.100.1', trusted)).toBe('198.51.100.1');
    expect(resolveClientIp('10.0.0.2', ['6.6.6.6', '198.51.100.1'], trusted)).toBe('198.51.100.1');
  });

  it('uses the left-most hop when every hop is trusted, and stops at a malformed hop', () => {
    expect(resolveClientIp('10.0.0.2', '10.0.0.3, 10.0.0.4', trusted)).toBe('10.0.0.3');
    expect(resolveClientIp('10.0.0.2', '198.51.100.1, garbage', trusted)).toBe('garbage');
    expect(resolveClientIp('10.0.0.2', undefined, trusted)).toBe('10.0.0.2');
  });
});
