import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BACKENDS } from '../helpers/db.js';
import { merchantWithKey } from '../helpers/client.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { pipelineTestRoutes } from './testRoutes.js';

const NOT_LISTED = { error: { status: 403, message: 'Request IP not in API key whitelist' } };

describe.each(BACKENDS)('pipeline stage 4, IP whitelist, on %s', (backend) => {
  let s: TestServer;
  beforeAll(async () => {
    // Dual-stack listener: IPv4 peers appear as ::ffff:127.0.0.1; TRUSTED_PROXIES for the XFF cases.
    s = await startTestServer({ backend, env: { HOST: '::', TRUSTED_PROXIES: '::1,10.9.0.0/16' }, externalPlugins: [pipelineTestRoutes] });
  });
  afterAll(async () => s?.close());

  const port = () => new URL(s.url).port;
  async function call(whitelist: string[], options: { via?: 'v4' | 'v6'; xff?: string } = {}) {
    const m = await merchantWithKey(s, { ipWhitelist: whitelist });
    const host = options.via === 'v6' ? '[::1]' : '127.0.0.1';
    const res = await fetch(`http://${host}:${port()}/api/external/test/ping`, {
      headers: { authorization: m.client.authHeader(), ...(options.xff ? { 'x-forwarded-for': options.xff } : {}) },
    });
    return { status: res.status, body: await res.json() };
  }

  it('403 "IP whitelist required…" for an empty whitelist', async () => {
    expect(await call([])).toEqual({
      status: 403,
      body: { error: { status: 403, message: 'IP whitelist required. Configure at least one allowed IP to use this API key.' } },
    });
  });

  it('403 "Request IP not in API key whitelist" when the IP is not listed', async () => {
    expect(await call(['203.0.113.7'])).toEqual({ status: 403, body: NOT_LISTED });
  });

  it('matches an exact IPv4 entry; ::ffff:127.0.0.1 of a dual-stack listener is normalized to IPv4', async () => {
    expect((await call(['127.0.0.1'])).status).toBe(200);
  });

  it('matches IPv4 CIDR entries, /32 for one host and /0 for all', async () => {
    expect((await call(['127.0.0.0/8'])).status).toBe(200);
    expect((await call(['127.0.0.1/32'])).status).toBe(200);
    expect((await call(['0.0.0.0/0'])).status).toBe(200);
    expect((await call(['127.0.0.2/32'])).status).toBe(403);
  });

  it('entries with leading zeros, spaces or wrong masks never match', async () => {
    for (const entry of ['127.000.000.001', '127.0.0.01', ' 127.0.0.1', '127.0.0.1 ', '127.0.0.1/33', '127.0.0.1/8', '127.0.0.0/08', '127.0.0.0/', '127.0.0.1/255.0.0.0']) {
      expect(await call([entry]), entry).toEqual({ status: 403, body: NOT_LISTED });
    }
  });

  it('matches a full IPv6 address (standard notation, canonical comparison)', async () => {
    expect((await call(['::1'], { via: 'v6' })).status).toBe(200);
    expect((await call(['0:0:0:0:0:0:0:1'], { via: 'v6' })).status).toBe(200);
    expect((await call(['127.0.0.1'], { via: 'v6' })).status).toBe(403);
    expect((await call(['::1/128'], { via: 'v6' })).status).toBe(403);
  });

  it('honours X-Forwarded-For only from a trusted proxy, taking the right-most untrusted hop', async () => {
    // Over IPv6 loopback the peer is ::1, a trusted proxy.
    expect((await call(['198.51.100.4'], { via: 'v6', xff: '198.51.100.4' })).status).toBe(200);
    // Trusted hops (10.9.x.x) are skipped from the right; a forged left-most entry is not used.
    expect((await call(['198.51.100.4'], { via: 'v6', xff: '6.6.6.6, 198.51.100.4, 10.9.0.1, 10.9.3.3' })).status).toBe(200);
    expect((await call(['6.6.6.6'], { via: 'v6', xff: '6.6.6.6, 198.51.100.4, 10.9.0.1' })).status).toBe(403);
    // Over IPv4 the peer (127.0.0.1) is not trusted: the header is ignored.
    expect((await call(['198.51.100.4'], { via: 'v4', xff: '198.51.100.4' })).status).toBe(403);
    expect((await call(['127.0.0.1'], { via: 'v4', xff: '198.51.100.4' })).status).toBe(200);
    // A malformed hop matches nothing.
    expect((await call(['198.51.100.4'], { via: 'v6', xff: '198.51.100.4, not-an-ip' })).status).toBe(403);
  });

  it('403 "Account is not active" when the key’s account is inactive (after the IP check)', async () => {
    const m = await merchantWithKey(s, { ipWhitelist: ['127.0.0.1'] });
    await s.admin('PATCH', `/accounts/${m.accountId}`, { status: 'inactive' });
    const res = await fetch(`http://127.0.0.1:${port()}/api/external/test/ping`, { headers: { authorization: m.client.authHeader() } });
    expect(res.status).toBe(403);
    expect(await res.json()).toEqual({ error: { status: 403, message: 'Account is not active' } });
  });
});
