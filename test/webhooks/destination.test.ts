import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { parseConfig } from '../../src/config.js';
import { addressProblem, hostProblem, isAllowedHost, parseAllowedHosts, parseLegacyIpv4 } from '../../src/webhooks/destination.js';
import { guardedLookup, PrivateDestinationError, signDelivery } from '../../src/webhooks/http.js';
import { retryDelayMs } from '../../src/webhooks/workers.js';

/** The refused IPv4 ranges, written independently of the implementation (the oracle). */
const BLOCKED: Array<[number, number]> = [
  ['0.0.0.0', 8], ['10.0.0.0', 8], ['100.64.0.0', 10], ['127.0.0.0', 8], ['169.254.0.0', 16], ['172.16.0.0', 12],
  ['192.0.0.0', 24], ['192.0.2.0', 24], ['192.88.99.0', 24], ['192.168.0.0', 16], ['198.18.0.0', 15],
  ['198.51.100.0', 24], ['203.0.113.0', 24], ['224.0.0.0', 4], ['240.0.0.0', 4],
].map(([a, p]) => [toInt(a as string), p as number]);

function toInt(dotted: string): number {
  return dotted.split('.').reduce((acc, part) => acc * 256 + Number(part), 0);
}
function dotted(n: number): string {
  return [n >>> 24, (n >>> 16) & 255, (n >>> 8) & 255, n & 255].join('.');
}
function blocked(n: number): boolean {
  return BLOCKED.some(([net, p]) => Math.floor(n / 2 ** (32 - p)) === Math.floor(net / 2 ** (32 - p)));
}

/** Every legacy spelling of an IPv4 address that browsers and inet_aton accept. */
function spellings(n: number): string[] {
  const b = [n >>> 24, (n >>> 16) & 255, (n >>> 8) & 255, n & 255];
  const low24 = n & 0xffffff;
  const low16 = n & 0xffff;
  return [
    String(n),
    `0x${n.toString(16)}`,
    `0${n.toString(8)}`,
    b.map((x) => `0x${x.toString(16)}`).join('.'),
    b.map((x) => `0${x.toString(8)}`).join('.'),
    `${b[0]}.${low24}`,
    `0x${b[0]!.toString(16)}.0x${low24.toString(16)}`,
    `${b[0]}.${b[1]}.${low16}`,
    `0${b[0]!.toString(8)}.${b[1]}.0x${low16.toString(16)}`,
  ];
}

const anyIpv4 = fc.integer({ min: 0, max: 0xffffffff });
const blockedIpv4 = fc
  .tuple(fc.constantFrom(...BLOCKED), fc.integer({ min: 0, max: 0xffffffff }))
  .map(([[net, p], r]) => net + (p === 32 ? 0 : r % 2 ** (32 - p)));

describe('private destinations (property tests)', () => {
  it('every spelling of a refused IPv4 address is refused, through URL parsing and without it', () => {
    fc.assert(
      fc.property(blockedIpv4, (n) => {
        for (const s of spellings(n)) {
          expect(parseLegacyIpv4(s)).toBe(BigInt(n));
          expect(hostProblem(s)).not.toBeNull();
          expect(hostProblem(new URL(`http://${s}/`).hostname)).not.toBeNull();
        }
        expect(hostProblem(new URL(`http://[::ffff:${dotted(n)}]/`).hostname)).toMatch(/^IPv4-mapped /);
        expect(addressProblem(`::ffff:${dotted(n)}`)).toMatch(/^IPv4-mapped /);
        expect(addressProblem(`64:ff9b::${dotted(n)}`)).toMatch(/^NAT64 /);
      }),
      { numRuns: 500 },
    );
  });

  it('an IPv4 address is refused exactly when it lies in a refused range, in any spelling', () => {
    fc.assert(
      fc.property(anyIpv4, (n) => {
        const refused = blocked(n);
        expect(addressProblem(dotted(n)) !== null).toBe(refused);
        for (const s of spellings(n)) expect(hostProblem(new URL(`http://${s}/`).hostname) !== null).toBe(refused);
        expect(addressProblem(`::ffff:${dotted(n)}`) !== null).toBe(refused);
      }),
      { numRuns: 2000 },
    );
  });

  it('IPv6: loopback, unspecified, link-local, unique-local, multicast, documentation refused; global unicast accepted', () => {
    for (const a of ['::1', '::', 'fe80::1', 'fe80::1%eth0', 'febf::1', 'fc00::', 'fdff:ffff::1', 'ff02::1', '2001:db8::1', 'fec0::1', '::7f00:1', '100::1', '2001::1']) {
      expect([a, addressProblem(a)]).not.toEqual([a, null]);
    }
    for (const a of ['2001:4860:4860::8888', '2606:4700::1111', '2a00:1450:4001::200e', '64:ff9b::808:808', '2002:808:808::1']) {
      expect([a, addressProblem(a)]).toEqual([a, null]);
    }
  });

  it('names: localhost and local suffixes refused, trailing dot and case ignored; public names accepted', () => {
    for (const h of ['localhost', 'LocalHost.', 'a.localhost', 'x.local', 'X.LOCAL.', 'db.internal', 'nas.home.arpa', 'box.localdomain', 'redis']) {
      expect([h, hostProblem(h)]).not.toEqual([h, null]);
    }
    for (const h of ['example.com', 'hooks.merchant.com.br', 'local.example.com', 'internal.example.com', 'localhost.example.com']) {
      expect([h, hostProblem(h)]).toEqual([h, null]);
    }
  });

  it('legacy IPv4 parsing refuses what inet_aton refuses', () => {
    for (const s of ['256.1.1.1', '1.2.3.4.5', '0x100.1', '1.0x1000000', '08.1', 'abc', '', '1..2']) expect([s, parseLegacyIpv4(s)]).toEqual([s, null]);
  });
});

describe('WEBHOOK_ALLOWED_HOSTS', () => {
  const allowed = parseAllowedHosts(['127.0.0.1:4000', 'receiver.corp.internal', '[::1]:9000', '::2', 'plain:80']);

  it('matches host:port at that port only, host at any port, in the form URL parsing gives', () => {
    const yes = ['http://127.0.0.1:4000/', 'http://2130706433:4000/x', 'https://receiver.corp.internal/', 'http://RECEIVER.corp.internal:81/', 'http://[::1]:9000/', 'http://[::2]:1/', 'http://plain/'];
    const no = ['http://127.0.0.1/', 'http://127.0.0.1:4001/', 'http://[::1]/', 'https://plain/', 'http://other.corp.internal/'];
    for (const u of yes) expect([u, isAllowedHost(allowed, new URL(u))]).toEqual([u, true]);
    for (const u of no) expect([u, isAllowedHost(allowed, new URL(u))]).toEqual([u, false]);
  });

  it('config refuses entries that are not a host or host:port', () => {
    expect(() => parseConfig({ WEBHOOK_ALLOWED_HOSTS: 'http://x/' })).toThrow(/WEBHOOK_ALLOWED_HOSTS entry "http:\/\/x\/"/);
    expect(() => parseConfig({ WEBHOOK_ALLOWED_HOSTS: 'a:b:c:d' })).toThrow(/WEBHOOK_ALLOWED_HOSTS entry/);
    expect(parseConfig({ WEBHOOK_ALLOWED_HOSTS: 'Example.com:8080, ::1' }).webhookAllowedHosts).toEqual(['example.com:8080', '::1']);
  });
});

describe('delivery settings', () => {
  it('WEBHOOK_TIMEOUT_MS and WEBHOOK_RETRY_SCHEDULE have defaults and are validated', () => {
    const c = parseConfig({});
    expect(c.webhookTimeoutMs).toBe(10_000);
    expect(c.webhookRetryScheduleMs).toEqual([5_000, 30_000, 120_000, 600_000, 1_800_000, 3_600_000, 7_200_000, 14_400_000, 28_800_000, 28_800_000]);
    // 11 attempts over about a day
    expect(c.webhookRetryScheduleMs.reduce((a, b) => a + b, 0) / 3_600_000).toBeCloseTo(23.7, 1);
    expect(parseConfig({ WEBHOOK_RETRY_SCHEDULE: '100ms, 1s,2m,1h' }).webhookRetryScheduleMs).toEqual([100, 1000, 120_000, 3_600_000]);
    expect(() => parseConfig({ WEBHOOK_RETRY_SCHEDULE: '5x' })).toThrow('WEBHOOK_RETRY_SCHEDULE entry "5x" is not a duration of at most 24h such as 500ms, 5s, 2m or 1h');
    expect(() => parseConfig({ WEBHOOK_RETRY_SCHEDULE: '25h' })).toThrow(/WEBHOOK_RETRY_SCHEDULE entry "25h"/);
    expect(() => parseConfig({ WEBHOOK_RETRY_SCHEDULE: Array(31).fill('1s').join(',') })).toThrow('WEBHOOK_RETRY_SCHEDULE has 31 entries; at most 30');
    expect(() => parseConfig({ WEBHOOK_TIMEOUT_MS: '50' })).toThrow('WEBHOOK_TIMEOUT_MS must be between 100 and 120000, got 50');
  });

  it('retry waits follow the schedule within ±20 % and stop when it is exhausted', () => {
    fc.assert(
      fc.property(fc.array(fc.integer({ min: 0, max: 86_400_000 }), { minLength: 1, maxLength: 30 }), fc.double({ min: 0, max: 0.999999, noNaN: true }), (schedule, r) => {
        for (let step = 1; step <= schedule.length; step++) {
          const d = retryDelayMs(schedule, step, () => r)!;
          expect(d).toBeGreaterThanOrEqual(Math.floor(schedule[step - 1]! * 0.8));
          expect(d).toBeLessThanOrEqual(Math.ceil(schedule[step - 1]! * 1.2));
        }
        expect(retryDelayMs(schedule, schedule.length + 1, () => r)).toBeNull();
      }),
    );
  });

  it('signature: hex HMAC-SHA256 of the exact bytes', () => {
    // RFC 4231 test case 2
    expect(signDelivery('Jefe', 'what do ya want for nothing?')).toBe('5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843');
  });
});

describe('connection-time check (guarded lookup)', () => {
  const lookupWith = (answers: Record<string, Array<{ address: string; family: number }>>) =>
    guardedLookup(async (host) => {
      const a = answers[host];
      if (!a) throw Object.assign(new Error(`getaddrinfo ENOTFOUND ${host}`), { code: 'ENOTFOUND' });
      return a;
    });
  const run = (lookup: ReturnType<typeof lookupWith>, host: string, options: object) =>
    new Promise<{ err: Error | null; result: unknown }>((resolve) =>
      lookup(host, options as never, (err: Error | null, address: unknown, family?: number) => resolve({ err, result: family === undefined ? address : [address, family] })),
    );

  const lookup = lookupWith({
    'public.example.com': [{ address: '93.184.216.34', family: 4 }, { address: '2606:2800:220:1::1', family: 6 }],
    'rebind.example.com': [{ address: '127.0.0.1', family: 4 }],
    'mixed.example.com': [{ address: '93.184.216.34', family: 4 }, { address: '10.0.0.7', family: 4 }],
    'mapped.example.com': [{ address: '::ffff:169.254.169.254', family: 6 }],
  });

  it('passes public answers through, as one address or all of them', async () => {
    expect(await run(lookup, 'public.example.com', {})).toEqual({ err: null, result: ['93.184.216.34', 4] });
    expect(await run(lookup, 'public.example.com', { family: 6 })).toEqual({ err: null, result: ['2606:2800:220:1::1', 6] });
    expect((await run(lookup, 'public.example.com', { all: true })).result).toEqual([
      { address: '93.184.216.34', family: 4 },
      { address: '2606:2800:220:1::1', family: 6 },
    ]);
  });

  it('refuses a name if any of its addresses is private', async () => {
    for (const [host, message] of [
      ['rebind.example.com', 'destination rebind.example.com resolves to 127.0.0.1 (loopback)'],
      ['mixed.example.com', 'destination mixed.example.com resolves to 10.0.0.7 (private network)'],
      ['mapped.example.com', 'destination mapped.example.com resolves to ::ffff:169.254.169.254 (IPv4-mapped 169.254.169.254, link-local)'],
    ]) {
      const { err } = await run(lookup, host!, { all: true });
      expect(err).toBeInstanceOf(PrivateDestinationError);
      expect(err!.message).toBe(message);
    }
    expect((await run(lookup, 'nowhere.example.com', {})).err?.message).toMatch(/ENOTFOUND/);
  });
});
