import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { merchantWithKey } from '../helpers/client.js';
import { sandbox } from '../helpers/pix.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { PortalHttp } from './portalHttp.js';

/** The sandbox panel's "Advance clock" form (docs/sandbox-clock.md), spoken over HTTP (fetch's Accept-Language: English). */
describe('portal sandbox panel: Advance clock', () => {
  let s: TestServer;
  beforeAll(async () => {
    s = await startTestServer({ workers: false });
  });
  afterAll(async () => s?.close());

  it('shows simulated now, advances the installation’s clock by 2 days, and says so', async () => {
    const m = await merchantWithKey(s);
    const p = await PortalHttp.signIn(s.url, m.client.clientId, m.client.clientSecret);
    const panel = await p.get('/portal/sandbox');
    expect(panel.status).toBe(200);
    expect(panel.text).toContain('<h2>Advance clock</h2>');
    expect(panel.text).toContain('(0 s ahead)');

    const hidden = await p.hiddenFields('/portal/sandbox', '/portal/sandbox/clock');
    const moved = await p.post('/portal/sandbox/clock', { ...hidden, amount: '2', unit: 'days' });
    expect(moved.status).toBe(303);
    expect(await p.flash(moved.location!)).toMatch(/^Clock advanced 2 days: simulated now \S/);
    expect((await sandbox(s, 'GET', '/clock')).body.offset_seconds).toBe(2 * 86_400);
    expect((await p.get('/portal/sandbox')).text).toContain('(172800 s ahead)');
    const pt = await fetch(`${s.url}/portal/sandbox`, { headers: { cookie: p.cookie, 'accept-language': 'pt-BR' } });
    const ptText = await pt.text();
    expect(ptText).toContain('<h2>Avançar o relógio</h2>');
    expect(ptText).toContain('(172800 s adiantado)');

    const bad = await p.post('/portal/sandbox/clock', { ...(await p.hiddenFields('/portal/sandbox', '/portal/sandbox/clock')), amount: '0', unit: 'hours' });
    expect(bad.status).toBe(303);
    expect((await p.get(bad.location!)).text).toContain('must be a whole number from 1');
    expect((await sandbox(s, 'GET', '/clock')).body.offset_seconds).toBe(2 * 86_400);
  });

  it('a key without pix:write sees no clock form and may not post it', async () => {
    const m = await merchantWithKey(s, { permissions: ['account:read', 'payment:write', 'payment:read'] });
    const p = await PortalHttp.signIn(s.url, m.client.clientId, m.client.clientSecret);
    const panel = await p.get('/portal/sandbox');
    expect(panel.status).toBe(200);
    expect(panel.text).not.toContain('/portal/sandbox/clock');
    const hidden = await p.hiddenFields('/portal/sandbox', '/portal/sandbox/infraction');
    const before = (await sandbox(s, 'GET', '/clock')).body.offset_seconds;
    expect((await p.post('/portal/sandbox/clock', { ...hidden, amount: '1', unit: 'days' })).status).toBe(403);
    expect((await sandbox(s, 'GET', '/clock')).body.offset_seconds).toBe(before);
  });
});
