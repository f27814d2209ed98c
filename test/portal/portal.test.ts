import { existsSync, mkdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium, type Browser, type BrowserContext, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { addPixKey, merchantWithKey, type MerchantFixture } from '../helpers/client.js';
import { balances, foreignKey, sandbox, SIM_FAST, waitFor } from '../helpers/pix.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { startReceiver, type Receiver } from '../webhooks/helpers.js';

/**
 * The merchant portal in a real headless browser (Debian's chromium driven by playwright-core):
 * sign-in, every page with real data, a webhook created and its webhook.test delivered to a local
 * receiver, a TEF that changes both balances, and the refusals (wrong credentials, CSRF, foreign
 * origin, missing permission, the sign-in rate limit). Screenshots of each page go to docs/portal/.
 */
const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
// Screenshots: docs/portal/ when PORTAL_SCREENSHOTS=1 (to refresh the docs), a temporary folder otherwise.
const SHOTS = process.env.PORTAL_SCREENSHOTS ? join(import.meta.dirname, '..', '..', 'docs', 'portal') : join(tmpdir(), 'pixgate-portal-shots');
const haveChromium = existsSync(CHROMIUM);
if (!haveChromium && process.env.CI) throw new Error(`${CHROMIUM} is missing: .ci/run installs it with apt-get`);

describe.skipIf(!haveChromium)('merchant portal in chromium', () => {
  let s: TestServer;
  let a: MerchantFixture;
  let b: MerchantFixture;
  let bKey: string;
  let receiver: Receiver;
  let browser: Browser;
  let context: BrowserContext;
  let page: Page;

  const shot = async (name: string) => {
    mkdirSync(SHOTS, { recursive: true });
    await page.screenshot({ path: join(SHOTS, `${name}.png`), fullPage: true });
  };

  const signIn = async (p: Page, m: MerchantFixture) => {
    await p.goto(`${s.url}/portal/login`);
    await p.getByLabel('Client ID').fill(m.client.clientId);
    await p.getByLabel('Client secret').fill(m.client.clientSecret);
    await p.getByRole('button', { name: 'Sign in' }).click();
  };

  beforeAll(async () => {
    receiver = await startReceiver();
    s = await startTestServer({ env: { ...SIM_FAST, WEBHOOK_ALLOWED_HOSTS: receiver.hostPort, RATE_LIMIT_PER_MINUTE: '1000' } });
    a = await merchantWithKey(s, { name: 'Padaria Pão Quente', depositCents: 1_250_000 });
    b = await merchantWithKey(s, { name: 'Loja Bela' });
    await addPixKey(s, a.accountId, 'evp');
    bKey = await addPixKey(s, b.accountId, 'evp');
    // Some history: a received PIX and a settled cash-out.
    await sandbox(s, 'POST', '/pix/inbound', { account_id: a.accountId, amount: 4_990, payer_name: 'Rita <b>Pagadora</b>' });
    const out = await a.client.post('/pix/cash-out', { amount: 1_500, pix_key: await foreignKey(s), description: 'Fornecedor' });
    expect(out.status).toBe(200);
    browser = await chromium.launch({
      executablePath: CHROMIUM,
      headless: true,
      args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage', '--disable-background-networking', '--disable-extensions', '--no-first-run', '--mute-audio'],
    });
    context = await browser.newContext({ viewport: { width: 1100, height: 800 }, locale: 'en-US' });
    page = await context.newPage();
  }, 60_000);

  afterAll(async () => {
    await browser?.close();
    await s?.close();
    await receiver?.close();
  });

  it('refuses wrong credentials', async () => {
    await page.goto(`${s.url}/portal/login`);
    await page.getByLabel('Client ID').fill(a.client.clientId);
    await page.getByLabel('Client secret').fill('sk_wrong');
    const [res] = await Promise.all([page.waitForResponse((r) => r.url().endsWith('/portal/login') && r.request().method() === 'POST'), page.getByRole('button', { name: 'Sign in' }).click()]);
    expect(res.status()).toBe(401);
    expect(await page.getByRole('alert').first().textContent()).toContain('Wrong client ID or secret');
    await shot('sign-in');
    expect((await context.cookies()).some((c) => c.name === 'pixgate_portal')).toBe(false);
  });

  it('signs in (HttpOnly, SameSite=Strict cookie) and shows the balance', async () => {
    await signIn(page, a);
    await page.waitForURL('**/portal/balance');
    const cookie = (await context.cookies()).find((c) => c.name === 'pixgate_portal')!;
    expect(cookie).toMatchObject({ httpOnly: true, sameSite: 'Strict', path: '/portal' });
    const bal = await balances(s.ctx.db, a.accountId);
    expect(await page.getByTestId('available').textContent()).toBe(`R$ ${(bal.available / 10_000).toFixed(2).replace('.', ',').replace(/\B(?=(\d{3})+(?!\d))/, '.')}`);
    expect(await page.getByTestId('blocked').textContent()).toBe('R$ 0,00');
    await shot('balance');
  });

  it('lists the statement with filters, pages and a CSV export, escaping what merchants and payers typed', async () => {
    await page.goto(`${s.url}/portal/statement`);
    expect(await page.locator('tbody tr').count()).toBe(3); // deposit, inbound PIX, cash-out
    expect(await page.locator('tbody').first().textContent()).toContain('Rita <b>Pagadora</b>'); // shown as text
    expect(await page.locator('tbody b').count()).toBe(0);
    await shot('statement');
    await page.selectOption('#f-type', 'internal');
    await page.getByRole('button', { name: 'Filter' }).click();
    expect(await page.locator('tbody tr').count()).toBe(1);
    const csv = await page.request.get(`${s.url}/portal/statement.csv?type=pix`);
    expect(csv.status()).toBe(200);
    expect(csv.headers()['content-type']).toContain('text/csv');
    const lines = (await csv.text()).trim().split('\r\n');
    expect(lines[0]).toMatch(/^created_at,transaction_id,/);
    expect(lines).toHaveLength(3);
  });

  it('shows a transaction with its events and its receipt', async () => {
    await page.goto(`${s.url}/portal/statement?type=pix`);
    await page.locator('tbody a', { hasText: 'PIXIN' }).first().click();
    await page.getByRole('heading', { name: 'Events' }).waitFor();
    expect(await page.locator('main').first().textContent()).toContain('pix.charge.paid');
    await shot('transaction');
    await page.getByTestId('receipt-link').click();
    expect(await page.getByTestId('receipt-e2e').textContent()).toMatch(/^E\w{31}$/);
    expect(await page.getByTestId('receipt-code').textContent()).toMatch(/^1-\w{4}-\w{4}-\w{4}-\w{4}$/);
    await shot('receipt');
  });

  it('creates a charge and shows its QR code', async () => {
    await page.goto(`${s.url}/portal/charges`);
    await page.getByLabel('Amount (R$)').fill('37,50');
    await page.getByLabel('Description').fill('Pedido 42');
    await page.getByRole('button', { name: 'Create charge' }).click();
    expect(await page.getByRole('status').first().textContent()).toContain('created');
    const img = page.getByTestId('qr');
    expect(await img.getAttribute('src')).toMatch(/^data:image\/png;base64,/);
    expect(await img.evaluate((el) => (el as unknown as { naturalWidth: number }).naturalWidth)).toBeGreaterThan(0);
    expect(await page.getByTestId('emv').inputValue()).toContain('br.gov.bcb.pix');
    await shot('charge');
  });

  it('makes a TEF that changes both balances', async () => {
    const before = [await balances(s.ctx.db, a.accountId), await balances(s.ctx.db, b.accountId)];
    await page.goto(`${s.url}/portal/tef`);
    await page.getByLabel('Amount (R$)').fill('120,00');
    await page.getByLabel('PIX key of the destination').fill(bKey);
    await page.getByLabel('Description').fill('Acerto de contas');
    await page.getByRole('button', { name: 'Transfer' }).click();
    expect(await page.getByRole('status').first().textContent()).toContain('Transferred R$ 120,00 to Loja Bela');
    expect((await balances(s.ctx.db, a.accountId)).available).toBe(before[0]!.available - 1_200_000);
    expect((await balances(s.ctx.db, b.accountId)).available).toBe(before[1]!.available + 1_200_000);
    await shot('tef');
    // a refusal is shown, nothing moves
    const after = await balances(s.ctx.db, a.accountId);
    await page.getByLabel('Amount (R$)').fill('999999,00');
    await page.getByLabel('PIX key of the destination').fill(bKey);
    await page.getByRole('button', { name: 'Transfer' }).click();
    expect(await page.getByRole('alert').first().textContent()).toMatch(/limit|maximum|balance/i);
    expect(await balances(s.ctx.db, a.accountId)).toEqual(after);
  });

  it('a TEF form sent three times (a resubmission racing a double click) moves the money once and shows the first result', async () => {
    const before = [await balances(s.ctx.db, a.accountId), await balances(s.ctx.db, b.accountId)];
    await page.goto(`${s.url}/portal/tef`);
    await page.getByLabel('Amount (R$)').fill('7,00');
    await page.getByLabel('PIX key of the destination').fill(bKey);
    // The filled form as the browser sends it, posted twice at once with the browser's session…
    const fields = await page.evaluate<Record<string, string>>(
      `Object.fromEntries([...document.querySelector('form[action="/portal/tef"]').elements].filter((e) => e.name).map((e) => [e.name, e.value]))`,
    );
    expect(fields._form).toMatch(/^[A-Za-z0-9_-]{22}$/);
    const posts = await Promise.all([1, 2].map(() => page.request.post(`${s.url}/portal/tef`, { form: fields, maxRedirects: 0, headers: { 'accept-language': 'en-US' } })));
    expect(posts.map((r) => r.status())).toEqual([303, 303]);
    // …then submitted by a click: the page shows the first result.
    await page.getByRole('button', { name: 'Transfer' }).click();
    const shown = await page.getByRole('status').first().textContent();
    expect(shown).toMatch(/^Transferred R\$ 7,00 to Loja Bela \(TEF\w+\)$/);
    expect((await balances(s.ctx.db, a.accountId)).available).toBe(before[0]!.available - 70_000);
    expect((await balances(s.ctx.db, b.accountId)).available).toBe(before[1]!.available + 70_000);
    const [tef] = await s.ctx.db.query<{ n: string }>(`SELECT count(*) AS n FROM transactions WHERE account_id = $1 AND kind = 'tef_out' AND amount = 70000`, [a.accountId]);
    expect(Number(tef!.n)).toBe(1);
    expect(shown).toContain((await s.ctx.db.query<{ t: string }>(`SELECT transaction_id AS t FROM transactions WHERE account_id = $1 AND kind = 'tef_out' AND amount = 70000`, [a.accountId]))[0]!.t);
  });

  it('creates a webhook, sends webhook.test to a local receiver and shows the delivery log', async () => {
    await page.goto(`${s.url}/portal/webhooks`);
    await page.getByLabel('URL').fill(`${receiver.url}/hooks/pixgate`);
    await page.getByLabel('tef.transfer.sent').check();
    await page.getByLabel('Allow http:// (testing only)').check();
    await page.getByRole('button', { name: 'Create webhook' }).click();
    expect(await page.getByRole('status').first().textContent()).toContain('Webhook created');
    await page.getByRole('button', { name: 'Send webhook.test' }).click();
    await receiver.waitFor((r) => r.some((x) => x.body?.event === 'webhook.test'));
    const test = receiver.received.find((x) => x.body?.event === 'webhook.test')!;
    expect(test.body).toMatchObject({ status: 'test', description: 'Test delivery fired from the merchant portal' });
    await waitFor(
      async () => {
        await page.reload();
        return page.getByTestId('delivery').first().textContent();
      },
      (t) => (t ?? '').includes('Delivered') && (t ?? '').includes('200'),
    );
    expect(await page.getByTestId('delivery').first().first().textContent()).toContain('{"ok":true}');
    await shot('webhook');
    await page.getByRole('button', { name: 'Resend' }).first().click();
    expect(await page.getByRole('status').first().textContent()).toContain('queued again');
    await receiver.waitFor((r) => r.filter((x) => x.body?.event === 'webhook.test').length === 2);
    await page.goto(`${s.url}/portal/webhooks`);
    await shot('webhooks');
  });

  it('opens an infraction from the sandbox panel and submits a defense on the MED page', async () => {
    await page.goto(`${s.url}/portal/sandbox`);
    await shot('sandbox');
    const [pixIn] = await s.ctx.db.query<{ transaction_id: string }>(`SELECT transaction_id FROM transactions WHERE account_id = $1 AND kind = 'pix_in'`, [a.accountId]);
    await page.getByLabel('Received PIX (transaction or end-to-end id)').fill(pixIn!.transaction_id);
    await page.getByLabel('Amount claimed (R$, empty: all)').fill('20,00');
    await page.getByRole('button', { name: 'Open', exact: true }).click();
    expect(await page.getByRole('status').first().textContent()).toContain('opened');
    expect(await page.locator('main').first().textContent()).toContain('R$ 20,00');
    await page.getByLabel('What happened').fill('The customer received the goods; tracking attached.');
    await page.getByLabel('Link to a document (optional)').fill('https://example.com/tracking/123');
    await page.getByRole('button', { name: 'Submit defense' }).click();
    expect(await page.getByRole('status').first().textContent()).toContain('Defense submitted');
    expect(await page.locator('main').first().textContent()).toContain('defense_submitted');
    await shot('med-case');
    await page.goto(`${s.url}/portal/med`);
    expect(await page.locator('tbody tr').count()).toBe(1);
    await shot('med');
  });

  it('refuses a write without the CSRF token or from another origin', async () => {
    const before = await balances(s.ctx.db, a.accountId);
    const noToken = await page.request.post(`${s.url}/portal/tef`, { form: { amount: '1,00', pix_key: bKey } });
    expect(noToken.status()).toBe(403);
    expect(await noToken.text()).toContain('CSRF');
    const csrf = await page.goto(`${s.url}/portal/tef`).then(() => page.locator('input[name=_csrf]').first().inputValue());
    const foreign = await page.request.post(`${s.url}/portal/tef`, { form: { _csrf: csrf, amount: '1,00', pix_key: bKey }, headers: { origin: 'https://evil.example' } });
    expect(foreign.status()).toBe(403);
    const wrong = await page.request.post(`${s.url}/portal/tef`, { form: { _csrf: `${csrf.slice(0, -1)}x`, amount: '1,00', pix_key: bKey } });
    expect(wrong.status()).toBe(403);
    expect(await balances(s.ctx.db, a.accountId)).toEqual(before);
  });

  it("applies the key's permissions and IP whitelist to every page", async () => {
    const reader = await merchantWithKey(s, { permissions: ['account:read'] });
    const ctx2 = await browser.newContext({ locale: 'en-US' });
    const p2 = await ctx2.newPage();
    try {
      await signIn(p2, reader);
      await p2.waitForURL('**/portal/balance');
      expect(await p2.getByRole('navigation').first().textContent()).not.toContain('Transfer (TEF)');
      expect((await p2.goto(`${s.url}/portal/tef`))!.status()).toBe(403);
      expect((await p2.goto(`${s.url}/portal/statement`))!.status()).toBe(403);
      // the whitelist is re-checked on every request: off the list, the session ends
      await s.admin('PATCH', `/api-keys/${reader.client.clientId}`, { ip_whitelist: ['203.0.113.7'] });
      await p2.goto(`${s.url}/portal/balance`);
      expect(p2.url()).toContain('/portal/login?why=ip');
    } finally {
      await ctx2.close();
    }
  });

  it('is readable on a phone', async () => {
    const phone = await browser.newContext({ viewport: { width: 390, height: 844 }, deviceScaleFactor: 2, isMobile: true, locale: 'en-US' });
    const p3 = await phone.newPage();
    try {
      await signIn(p3, a);
      await p3.waitForURL('**/portal/balance');
      const overflow = await p3.evaluate<number>('document.documentElement.scrollWidth - document.documentElement.clientWidth');
      expect(overflow).toBeLessThanOrEqual(0);
      mkdirSync(SHOTS, { recursive: true });
      await p3.screenshot({ path: join(SHOTS, 'balance-phone.png') });
    } finally {
      await phone.close();
    }
  });

  it('signs out, and limits sign-in attempts to 5 a minute per address', async () => {
    await page.goto(`${s.url}/portal/balance`);
    await page.getByRole('button', { name: 'Sign out' }).click();
    await page.waitForURL('**/portal/login');
    expect((await page.goto(`${s.url}/portal/balance`))!.url()).toContain('/portal/login');
    const statuses: number[] = [];
    for (let i = 0; i < 7; i++) {
      const res = await fetch(`${s.url}/portal/login`, { method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded' }, body: 'client_id=cli_x&client_secret=nope', redirect: 'manual' });
      statuses.push(res.status);
    }
    expect(statuses.filter((x) => x === 429).length).toBeGreaterThanOrEqual(2);
    expect(statuses.slice(-1)).toEqual([429]);
  });
});
