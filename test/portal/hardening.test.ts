import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { addPixKey, merchantWithKey, type MerchantFixture } from '../helpers/client.js';
import { BACKENDS } from '../helpers/db.js';
import { balances, SIM_FAST } from '../helpers/pix.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { PortalHttp } from './portalHttp.js';

/**
 * The portal's edges (issue 24, item 12): a hostile Origin is a CSRF refusal page, never a 500;
 * `/portal/` serves the portal; the sandbox panel needs the key's permissions, as the API would,
 * and is the merchant's action, not an operator write.
 */
describe.each(BACKENDS)('portal edges on %s', (backend) => {
  let s: TestServer;
  let a: MerchantFixture;
  let portal: PortalHttp;

  beforeAll(async () => {
    s = await startTestServer({ backend, env: SIM_FAST, workers: false });
    a = await merchantWithKey(s, { name: 'Loja A', depositCents: 10_000 });
    portal = await PortalHttp.signIn(s.url, a.client.clientId, a.client.clientSecret);
  });
  afterAll(async () => {
    await s?.close();
  });

  it('answers a POST with an unparseable or foreign Origin with the CSRF refusal page (403), sign-in included', async () => {
    for (const origin of ['garbage', 'http://', '://x', 'null', 'https://evil.example', 'http:// spaced']) {
      const login = await fetch(`${s.url}/portal/login`, {
        method: 'POST',
        headers: { origin, 'content-type': 'application/x-www-form-urlencoded', 'accept-language': 'en' },
        body: 'client_id=x&client_secret=y',
        redirect: 'manual',
      });
      expect({ origin, status: login.status }).toEqual({ origin, status: 403 });
      expect(login.headers.get('content-type')).toContain('text/html');
      expect(await login.text()).toContain('Cross-site form submissions are refused');
    }
    const fields = { ...(await portal.hiddenFields('/portal/tef', '/portal/tef')), amount: '1,00', pix_key: 'x@example.com' };
    const tef = await portal.post('/portal/tef', fields, { origin: 'garbage' });
    expect(tef.status).toBe(403);
    expect(tef.text).toContain('Cross-site form submissions are refused');
    // the same origin passes
    const ok = await portal.post('/portal/login', { client_id: a.client.clientId, client_secret: a.client.clientSecret }, { origin: s.url });
    expect(ok.status).toBe(303);
  });

  it('/portal/ serves the portal (a redirect), not a JSON 404; an unknown portal page is an HTML 404', async () => {
    const anonymous = await fetch(`${s.url}/portal/`, { redirect: 'manual' });
    expect(anonymous.status).toBe(303);
    expect(anonymous.headers.get('location')).toBe('/portal/login');
    const signedIn = await portal.get('/portal/');
    expect(signedIn.status).toBe(303);
    expect(signedIn.location).toBe('/portal/balance');
    const unknown = await fetch(`${s.url}/portal/nothing-here`, { headers: { cookie: portal.cookie } });
    expect(unknown.status).toBe(404);
    expect(unknown.headers.get('content-type')).toContain('text/html');
  });

  it("the sandbox panel needs the key's permissions: pix:write to receive, transfer:write for payouts, payment:write for MED", async () => {
    const reader = await merchantWithKey(s, { permissions: ['account:read'] });
    const p = await PortalHttp.signIn(s.url, reader.client.clientId, reader.client.clientSecret);
    expect((await p.get('/portal/sandbox')).status).toBe(403);
    expect((await p.get('/portal/balance')).text).not.toContain('href="/portal/sandbox"');
    // a post forged with the session's own CSRF token is refused too, and credits nothing
    const csrf = (await p.hiddenFields('/portal/balance', '/portal/logout'))._csrf!;
    for (const path of ['inbound', 'pay', 'infraction', 'resolve', 'payout']) {
      const res = await p.post(`/portal/sandbox/${path}`, { _csrf: csrf, _form: 'AAAAAAAAAAAAAAAAAAAAAA', amount: '5,00', emv: 'x', transaction: 'x', infraction_id: 'x', decision: 'settle' });
      expect({ path, status: res.status }).toEqual({ path, status: 403 });
    }
    expect((await balances(s.ctx.db, reader.accountId)).available).toBe(0);

    const cashIn = await merchantWithKey(s, { permissions: ['pix:write'] });
    const q = await PortalHttp.signIn(s.url, cashIn.client.clientId, cashIn.client.clientSecret);
    const page = await q.get('/portal/sandbox');
    expect(page.status).toBe(200);
    expect(page.text).toContain('action="/portal/sandbox/inbound"');
    expect(page.text).not.toContain('action="/portal/sandbox/payout"');
    expect(page.text).not.toContain('action="/portal/sandbox/infraction"');
    const fields = { ...(await q.hiddenFields('/portal/sandbox', '/portal/sandbox/inbound')), amount: '5,00' };
    const res = await q.post('/portal/sandbox/inbound', fields);
    expect(await q.flash(res.location!)).toContain('Received R$ 5,00');
    expect((await balances(s.ctx.db, cashIn.accountId)).available).toBe(50_000);
    const payout = await q.post('/portal/sandbox/payout', { ...fields, transaction: 'PIXOUT1', decision: 'settle' });
    expect(payout.status).toBe(403);
  });

  it('a sandbox action from the portal is the merchant’s: no operator audit row', async () => {
    const audit = async () => (await s.admin('GET', '/audit-log?limit=200')).body.entries.length as number;
    const before = await audit();
    const fields = { ...(await portal.hiddenFields('/portal/sandbox', '/portal/sandbox/inbound')), amount: '1,00' };
    const res = await portal.post('/portal/sandbox/inbound', fields);
    expect(await portal.flash(res.location!)).toContain('Received R$ 1,00');
    expect(await audit()).toBe(before);
  });

  it("the sandbox panel pays only this account's charges", async () => {
    const other = await merchantWithKey(s, { name: 'Outra' });
    const otherKey = await addPixKey(s, other.accountId, 'evp');
    const charge = await other.client.post('/pix/cash-in', { amount: 300, pix_key: otherKey });
    expect(charge.status).toBeLessThan(300);
    const emv = charge.body.emv as string;
    const fields = { ...(await portal.hiddenFields('/portal/sandbox', '/portal/sandbox/pay')), emv };
    const res = await portal.post('/portal/sandbox/pay', fields);
    expect(await portal.flash(res.location!)).toMatch(/not .*this account/i);
    expect((await balances(s.ctx.db, other.accountId)).available).toBe(0);
  });
});
