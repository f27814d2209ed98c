import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { validCnpj } from '../helpers/fixtures.js';
import { addPixKey, merchantWithKey, type MerchantFixture } from '../helpers/client.js';
import { BACKENDS, createTestSchema } from '../helpers/db.js';
import { balances, expectLedgerConsistent, SIM_FAST } from '../helpers/pix.js';
import { startPixgate, type PixgateProcess } from '../helpers/process.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { PortalHttp } from './portalHttp.js';

/**
 * A portal form runs once (issue 24, item 2): every form carries a one-time id, and a repeat of a
 * post — sequential (resubmission), concurrent (double click), or through another server process —
 * answers the first outcome and moves no money a second time. Real HTTP posts over sockets, with
 * the fields exactly as the page rendered them.
 */
const count = async (s: TestServer, sql: string, params: unknown[]) => Number((await s.ctx.db.query<{ n: string }>(sql, params))[0]!.n);

describe.each(BACKENDS)('portal forms run once on %s', (backend) => {
  let s: TestServer;
  let a: MerchantFixture;
  let b: MerchantFixture;
  let bKey: string;
  let portal: PortalHttp;

  beforeAll(async () => {
    s = await startTestServer({ backend, env: SIM_FAST, workers: false });
    a = await merchantWithKey(s, { name: 'Loja A', depositCents: 100_000 });
    b = await merchantWithKey(s, { name: 'Loja B' });
    bKey = await addPixKey(s, b.accountId, 'evp');
    await addPixKey(s, a.accountId, 'evp'); // charges need one
    portal = await PortalHttp.signIn(s.url, a.client.clientId, a.client.clientSecret);
  });
  afterAll(async () => {
    await s?.close();
  });

  const tefOuts = () => count(s, `SELECT count(*) AS n FROM transactions WHERE account_id = $1 AND kind = 'tef_out'`, [a.accountId]);

  it('a TEF form posted twice moves the money once; the repeat answers the first result', async () => {
    const fields = { ...(await portal.hiddenFields('/portal/tef', '/portal/tef')), amount: '10,00', pix_key: bKey };
    const before = await tefOuts();
    const first = await portal.post('/portal/tef', fields);
    expect(first.status).toBe(303);
    const firstFlash = await portal.flash(first.location!);
    expect(firstFlash).toContain('Transferred R$ 10,00 to Loja B');
    const again = await portal.post('/portal/tef', fields);
    expect(again.status).toBe(303);
    expect(again.location).toBe(first.location);
    expect(await portal.flash(again.location!)).toBe(firstFlash);
    expect(await tefOuts()).toBe(before + 1);
    expect((await balances(s.ctx.db, b.accountId)).available).toBe(100_000);
  });

  it('two identical TEF posts at once move the money once; both answer the first result', async () => {
    const fields = { ...(await portal.hiddenFields('/portal/tef', '/portal/tef')), amount: '1,00', pix_key: bKey };
    const before = await tefOuts();
    const bBefore = (await balances(s.ctx.db, b.accountId)).available;
    const posts = await Promise.all(Array.from({ length: 4 }, () => portal.post('/portal/tef', fields)));
    expect(posts.map((p) => p.status)).toEqual([303, 303, 303, 303]);
    expect(await tefOuts()).toBe(before + 1);
    expect((await balances(s.ctx.db, b.accountId)).available).toBe(bBefore + 10_000);
    await expectLedgerConsistent(s.ctx.db);
  });

  it('a refused TEF posted again answers the same refusal and records one failed transfer', async () => {
    const fields = { ...(await portal.hiddenFields('/portal/tef', '/portal/tef')), amount: '5000,00', pix_key: bKey };
    const before = await tefOuts();
    const first = await portal.post('/portal/tef', fields);
    const text = await portal.flash(first.location!);
    expect(text).toMatch(/balance/i);
    const again = await portal.post('/portal/tef', fields);
    expect(await portal.flash(again.location!)).toBe(text);
    expect(await tefOuts()).toBe(before + 1); // the one failed record
  });

  it('a form without its one-time id is refused and moves nothing', async () => {
    const fields = await portal.hiddenFields('/portal/tef', '/portal/tef');
    const before = await tefOuts();
    const res = await portal.post('/portal/tef', { _csrf: fields._csrf!, amount: '1,00', pix_key: bKey });
    expect(res.status).toBe(400);
    expect(res.text).toContain('reload');
    expect(await tefOuts()).toBe(before);
  });

  it('each form of a page has its own id: a charge and a sandbox PIX posted twice happen once', async () => {
    const charge = { ...(await portal.hiddenFields('/portal/charges', '/portal/charges')), amount: '3,00' };
    const charges = () => count(s, `SELECT count(*) AS n FROM pix_charges c JOIN transactions t ON t.id = c.transaction_uuid WHERE t.account_id = $1`, [a.accountId]);
    const chargesBefore = await charges();
    const c1 = await portal.post('/portal/charges', charge);
    const c2 = await portal.post('/portal/charges', charge);
    expect(c2.location).toBe(c1.location);
    expect(await charges()).toBe(chargesBefore + 1);

    const inbound: Record<string, string> = { ...(await portal.hiddenFields('/portal/sandbox', '/portal/sandbox/inbound')), amount: '2,00' };
    const pay = await portal.hiddenFields('/portal/sandbox', '/portal/sandbox/pay');
    expect(pay._form).not.toBe(inbound._form);
    const pixIns = () => count(s, `SELECT count(*) AS n FROM transactions WHERE account_id = $1 AND kind = 'pix_in'`, [a.accountId]);
    const before = await pixIns();
    const posts = await Promise.all([portal.post('/portal/sandbox/inbound', inbound), portal.post('/portal/sandbox/inbound', inbound)]);
    expect(posts.map((p) => p.status)).toEqual([303, 303]);
    expect(await portal.flash(posts[1]!.location!)).toContain('Received R$ 2,00');
    expect(await pixIns()).toBe(before + 1);
  });
});

/**
 * Two server processes on one PostgreSQL database (the built server, `npm run build`): the same TEF
 * form posted to both at once moves the money once.
 */
const pgUrl = process.env.TEST_DATABASE_URL;
describe.runIf(pgUrl)('portal forms run once across two server processes (PostgreSQL)', () => {
  const ADMIN_TOKEN = 'portal-forms-admin-token-0123';
  let c: pg.Client;
  let schema: string;
  let access: Awaited<ReturnType<typeof createTestSchema>>;
  const procs: PixgateProcess[] = [];

  beforeAll(async () => {
    schema = `portal_forms_${Date.now().toString(36)}`;
    c = new pg.Client({ connectionString: pgUrl, options: `-c search_path=${schema}` });
    await c.connect();
    access = await createTestSchema(schema);
    const env = { ...access.env(), ADMIN_TOKEN, APP_ENV: 'homologation', ...SIM_FAST };
    procs.push(await startPixgate(env)); // migrates first
    procs.push(await startPixgate(env));
  }, 120_000);
  afterAll(async () => {
    for (const p of procs) p.proc.kill('SIGTERM');
    await Promise.all(procs.map((p) => p.exited));
    await access?.drop();
    await c?.end();
  });

  it('the same TEF form posted to both processes at once moves the money once', async () => {
    const [p1, p2] = [procs[0]!.url!, procs[1]!.url!];
    const admin = async (path: string, body: unknown) => {
      const res = await fetch(`${p1}/api/admin${path}`, { method: 'POST', headers: { authorization: `Bearer ${ADMIN_TOKEN}`, 'content-type': 'application/json' }, body: JSON.stringify(body) });
      expect(res.status).toBeLessThan(300);
      return (await res.json()) as any;
    };
    const payer = await admin('/merchants', { name: 'Pagadora', document: validCnpj() });
    await admin(`/accounts/${payer.account_id}/deposits`, { amount: 50_000 });
    const key = await admin('/api-keys', { merchant_id: payer.merchant_id, permissions: ['transfer:write', 'pix:write'], ip_whitelist: ['127.0.0.1', '::1'] });
    const payee = await admin('/merchants', { name: 'Recebedora', document: validCnpj() });
    const pixKey = (await admin('/pix-keys', { account_id: payee.account_id, type: 'evp' })).key as string;

    const portal = await PortalHttp.signIn(p1, key.client_id, key.client_secret);
    for (let round = 0; round < 3; round++) {
      const fields = { ...(await portal.hiddenFields('/portal/tef', '/portal/tef')), amount: '1,00', pix_key: pixKey };
      const posts = await Promise.all([portal.post('/portal/tef', fields, {}, p1), portal.post('/portal/tef', fields, {}, p2)]);
      expect(posts.map((p) => p.status)).toEqual([303, 303]);
    }
    const { rows } = await c.query(`SELECT count(*)::int AS n FROM transactions WHERE account_id = $1 AND kind = 'tef_out'`, [payer.account_id]);
    expect(rows[0].n).toBe(3);
    const { rows: bal } = await c.query(`SELECT balance::bigint AS b FROM ledger_accounts WHERE account_id = $1 AND book = 'available'`, [payee.account_id]);
    expect(Number(bal[0].b)).toBe(3 * 10_000);

    // A sandbox simulation from the portal is logged as the merchant's action (its key), and is
    // no operator write.
    const inbound = { ...(await portal.hiddenFields('/portal/sandbox', '/portal/sandbox/inbound')), amount: '2,00' };
    expect((await portal.post('/portal/sandbox/inbound', inbound, {}, p2)).status).toBe(303);
    const line = procs[1]!.output().split('\n').find((l) => l.includes('"portal action"') && l.includes('/portal/sandbox/inbound'));
    expect(JSON.parse(line!)).toMatchObject({ client_id: key.client_id, merchant_id: payer.merchant_id, account_id: payer.account_id, outcome: 'ok' });
    const { rows: audit } = await c.query(`SELECT count(*)::int AS n FROM admin_audit_log WHERE route LIKE '/api/sandbox%'`);
    expect(audit[0].n).toBe(0);
  }, 60_000);
});
