import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createOperator } from '../../src/auth/operators.js';
import { totpCode } from '../../src/auth/totp.js';
import { deposit } from '../../src/merchants/service.js';
import { insertWebhook } from '../../src/webhooks/endpointsRepo.js';
import { randomUUID } from 'node:crypto';
import { merchantWithKey, type MerchantFixture } from '../helpers/client.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

/** The console's lists page (?page=N, 50 a page) and export as CSV (header, rows, formula-safe cells). */
const PASSWORD = 'uma senha bem comprida';

describe('console paging and CSV', () => {
  let s: TestServer;
  let a: MerchantFixture;
  let cookie = '';
  const get = (path: string) => fetch(`${s.url}${path}`, { headers: { cookie, 'accept-language': 'en' }, redirect: 'manual' });

  beforeAll(async () => {
    s = await startTestServer({ env: { RATE_LIMIT_PER_MINUTE: '1000' } });
    a = await merchantWithKey(s, { name: 'Padaria', depositCents: 10_000 });
    for (let i = 0; i < 55; i++) {
      await deposit(s.ctx.db, s.ctx.clock, { accountId: a.accountId, amountCents: 100 + i, description: i === 0 ? '=HYPERLINK("x")' : `deposit ${i}`, idempotencyKey: `paging-${i}` });
    }
    const { totpSecret } = await createOperator(s.ctx.db, { username: 'dona', password: PASSWORD, role: 'owner', createdBy: 'test' });
    const res = await fetch(`${s.url}/console/login`, {
      method: 'POST',
      body: new URLSearchParams({ username: 'dona', password: PASSWORD, code: totpCode(totpSecret, new Date()) }),
      headers: { origin: s.url },
      redirect: 'manual',
    });
    cookie = res.headers.get('set-cookie')!.split(';')[0]!;
  }, 120_000);
  afterAll(async () => {
    await s?.close();
  });

  const ids = (text: string) => [...text.matchAll(/href="\/console\/transactions\/([^"]+)"/g)].map((m) => m[1]!);

  it("an account's transactions: page 2 holds other rows; the CSV has the header and every row, formula-safe", async () => {
    const p1 = await (await get(`/console/accounts/${a.accountId}`)).text();
    const p2 = await (await get(`/console/accounts/${a.accountId}?page=2`)).text();
    const one = ids(p1);
    const two = ids(p2);
    expect(one).toHaveLength(50);
    expect(two.length).toBeGreaterThan(0);
    expect(two.filter((id) => one.includes(id))).toEqual([]);
    expect(p1).toContain(`href="/console/accounts/${a.accountId}?page=2"`);
    expect(p2).not.toContain('?page=3');
    const csv = await get(`/console/accounts/${a.accountId}/transactions.csv`);
    expect(csv.headers.get('content-type')).toContain('text/csv');
    const lines = (await csv.text()).trim().split('\r\n');
    expect(lines[0]).toBe('transaction_id,created_at,kind,direction,status,amount,description');
    expect(lines.length - 1).toBe(one.length + two.length);
    expect(lines.some((l) => l.includes(`"'=HYPERLINK(""x"")"`))).toBe(true);
  });

  it('the MED queue exports its header; a page past the bound is the last page', async () => {
    const csv = await get('/console/med.csv');
    expect(csv.status).toBe(200);
    expect((await csv.text()).split('\r\n')[0]).toBe('infraction_id,account_id,merchant_name,transaction_id,end_to_end_id,status,reason,amount,blocked_amount,defense_deadline');
    expect((await get('/console/med?page=99999')).status).toBe(200);
    expect(await (await get('/console/med')).text()).toContain('href="/console/med.csv"');
  });

  it('operators: page 2 holds other rows; the CSV has the header and every operator', async () => {
    for (let i = 0; i < 51; i++) await createOperator(s.ctx.db, { username: `op${String(i).padStart(2, '0')}`, password: PASSWORD, role: 'support', createdBy: 'test' });
    const names = (text: string) => [...text.matchAll(/data-operator="([^"]+)"/g)].map((m) => m[1]!);
    const one = names(await (await get('/console/operators')).text());
    const two = names(await (await get('/console/operators?page=2')).text());
    expect(one).toHaveLength(50);
    expect(two).toHaveLength(2);
    expect(two.filter((n) => one.includes(n))).toEqual([]);
    const lines = (await (await get('/console/operators.csv')).text()).trim().split('\r\n');
    expect(lines[0]).toBe('id,username,role,totp_confirmed,status,created_at,created_by');
    expect(lines).toHaveLength(53);
  });

  it('search results and webhooks export their header and rows; the search page links its CSV', async () => {
    const page = await (await get(`/console?q=${a.accountId}`)).text();
    expect(page).toContain(`href="/console/search.csv?q=${a.accountId}"`);
    const lines = (await (await get(`/console/search.csv?q=${a.accountId}`)).text()).trim().split('\r\n');
    expect(lines[0]).toBe('kind,found,detail,link');
    expect(lines.some((l) => l.startsWith('"account","Padaria"'))).toBe(true);
    const hooks = (await (await get('/console/webhooks.csv')).text()).split('\r\n');
    expect(hooks[0]).toBe('webhook_id,merchant_id,merchant_name,url,active,failed,pending,delivered,oldest_pending,last_status_code,last_error');
  });

  it('webhooks across merchants: page 2 holds other endpoints; the CSV has every one', async () => {
    for (let i = 0; i < 52; i++) {
      await insertWebhook(s.ctx.db, {
        id: randomUUID(), merchantId: a.merchantId, accountId: a.accountId, clientId: a.client.clientId, url: `https://hooks.example/${i}`,
        events: ['pix.payout.confirmed'], secret: 'whsec_test_0123456789abcdef', description: null, allowInsecure: false,
      } as Parameters<typeof insertWebhook>[1]);
    }
    const hookIds = (text: string) => [...text.matchAll(/data-webhook-id="([^"]+)"/g)].map((m) => m[1]!);
    const one = hookIds(await (await get('/console/webhooks')).text());
    const two = hookIds(await (await get('/console/webhooks?page=2')).text());
    expect(one).toHaveLength(50);
    expect(two).toHaveLength(2);
    expect(two.filter((id) => one.includes(id))).toEqual([]);
    expect((await (await get('/console/webhooks.csv')).text()).trim().split('\r\n')).toHaveLength(53);
  });
});
