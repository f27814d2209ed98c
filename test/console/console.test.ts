import { existsSync, mkdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium, type Browser, type BrowserContext, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { totpCode } from '../../src/auth/totp.js';
import { merchantWithKey, type MerchantFixture } from '../helpers/client.js';
import { balances, foreignKey, sandbox, SIM_FAST, waitFor } from '../helpers/pix.js';
import { startTestServer, TEST_ADMIN_TOKEN, type TestServer } from '../helpers/server.js';
import { startReceiver, type Receiver } from '../webhooks/helpers.js';

/**
 * The operator console in Debian's chromium (playwright-core), on a fresh local server: the owner
 * bootstrapped from ADMIN_TOKEN signs in with TOTP, finds a payment by its end-to-end id and sees
 * its timeline, credits a deposit once despite a double submit, fires webhook.test at a merchant's
 * webhook and sees it delivered to a local receiver, and finds those actions in the audit log under
 * their name; each role's refusals; merchant-controlled values shown as text; CSRF and Origin.
 * Screenshots at 1280 px go to docs/console/ (CONSOLE_SCREENSHOTS=1) or a temporary folder.
 */
const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
const SHOTS = process.env.CONSOLE_SCREENSHOTS ? join(import.meta.dirname, '..', '..', 'docs', 'console') : join(tmpdir(), 'pixgate-console-shots');
const haveChromium = existsSync(CHROMIUM);
if (!haveChromium && process.env.CI) throw new Error(`${CHROMIUM} is missing: .ci/run installs it with apt-get`);
const XSS = `<img src=x onerror="window.__xss=1">"'<script>window.__xss=2</script>`;
const PASSWORD = 'uma senha bem comprida';

describe.skipIf(!haveChromium)('operator console in chromium', () => {
  let s: TestServer;
  let a: MerchantFixture;
  let receiver: Receiver;
  let browser: Browser;
  let owner: BrowserContext;
  let page: Page;
  let webhookId = '';
  let payoutId = '';
  let payoutE2e = '';
  const secrets: Record<string, string> = {};
  let offsetMs = 0;
  const clock = { now: () => new Date(Date.now() + offsetMs) };
  /** A fresh TOTP code: the clock moves one step on each use, so no code repeats a used step. */
  const code = (secret: string) => {
    offsetMs += 30_000;
    return totpCode(secret, clock.now());
  };

  const shot = async (p: Page, name: string) => {
    mkdirSync(SHOTS, { recursive: true });
    await p.setViewportSize({ width: 1280, height: 800 });
    await p.screenshot({ path: join(SHOTS, `${name}.png`), fullPage: true });
  };
  const noXss = async (p: Page) => {
    expect(await p.evaluate('window.__xss')).toBeUndefined();
    expect(await p.locator('main img[src=x]').count()).toBe(0);
  };
  const signIn = async (p: Page, username: string) => {
    await p.goto(`${s.url}/console/login`);
    await p.getByLabel('Username').fill(username);
    await p.getByLabel('Password').fill(PASSWORD);
    await p.getByLabel('Code from your authenticator app').fill(code(secrets[username]!));
    await Promise.all([p.waitForURL(`${s.url}/console`), p.getByRole('button', { name: 'Sign in' }).click()]);
  };

  beforeAll(async () => {
    receiver = await startReceiver();
    s = await startTestServer({ clock, env: { ...SIM_FAST, WEBHOOK_ALLOWED_HOSTS: receiver.hostPort, RATE_LIMIT_PER_MINUTE: '1000' } });
    a = await merchantWithKey(s, { name: `Padaria ${XSS}`, depositCents: 100_000 });
    const hook = await a.client.post('/webhooks', { url: `${receiver.url}/hooks?x=<b>`, events: ['pix.payout.confirmed'], allow_insecure: true, description: XSS });
    expect(hook.status).toBe(201);
    webhookId = hook.body.id;
    const out = await a.client.post('/pix/cash-out', { amount: 1_500, pix_key: await foreignKey(s, { name: 'Fornecedor Ltda' }), description: `Pedido ${XSS}` }, { idempotencyKey: 'console-test-payout-1' });
    expect(out.status).toBe(200);
    payoutId = out.body.transaction_id;
    const settled = await waitFor(
      async () => (await s.ctx.db.query<{ status: number; end_to_end_id: string }>('SELECT status, end_to_end_id FROM transactions WHERE transaction_id = $1', [payoutId]))[0]!,
      (r) => r.status === 1,
    );
    payoutE2e = settled.end_to_end_id;
    // A received PIX under a MED infraction, for the queue.
    const inbound = await sandbox(s, 'POST', '/pix/inbound', { account_id: a.accountId, amount: 4_990, payer_name: `Rita ${XSS}` });
    expect(inbound.status).toBe(201);
    const e2e = (await s.ctx.db.query<{ e: string }>('SELECT end_to_end_id AS e FROM transactions WHERE transaction_id = $1', [inbound.body.transaction_id]))[0]!.e;
    expect((await sandbox(s, 'POST', '/infractions', { end_to_end_id: e2e, amount: 1_000 })).status).toBeLessThan(300);
    await waitFor(async () => (await s.ctx.db.query<{ n: number }>('SELECT count(*)::int AS n FROM med_infractions'))[0]!.n, (n) => n === 1);
    browser = await chromium.launch({
      executablePath: CHROMIUM,
      headless: true,
      args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage', '--disable-background-networking', '--disable-extensions', '--no-first-run', '--mute-audio'],
    });
    owner = await browser.newContext({ viewport: { width: 1280, height: 800 }, locale: 'en-US' });
    page = await owner.newPage();
    page.on('dialog', () => {
      throw new Error('a dialog opened: script ran');
    });
  }, 90_000);

  afterAll(async () => {
    await browser?.close();
    await s?.close();
    await receiver?.close();
  });

  it('bootstraps the first owner from ADMIN_TOKEN (once) with a TOTP enrolment, then signs in with the code', async () => {
    await page.goto(`${s.url}/console`);
    await page.waitForURL('**/console/bootstrap');
    await shot(page, 'bootstrap');
    await page.getByLabel('Admin token').fill('not-the-token-at-all');
    await page.getByLabel('Username of the owner').fill('alice');
    await page.getByLabel(/^Password/).fill(PASSWORD);
    await page.getByRole('button', { name: 'Create the owner' }).click();
    expect(await page.getByRole('alert').textContent()).toContain('not the admin token');
    await page.getByLabel('Admin token').fill(TEST_ADMIN_TOKEN);
    await page.getByLabel('Username of the owner').fill('alice');
    await page.getByLabel(/^Password/).fill(PASSWORD);
    await page.getByRole('button', { name: 'Create the owner' }).click();
    secrets.alice = (await page.getByTestId('totp-secret').textContent())!;
    expect(secrets.alice).toMatch(/^[A-Z2-7]{32}$/);
    expect(await page.getByTestId('totp-uri').textContent()).toMatch(/^otpauth:\/\/totp\/.*alice/);
    await shot(page, 'bootstrap-done');
    await page.goto(`${s.url}/console/bootstrap`);
    expect(await page.locator('main').textContent()).toContain('The first owner exists');

    // Wrong code refused; the right one signs in; the cookie is HttpOnly, SameSite=Strict, and its id is stored hashed.
    await page.goto(`${s.url}/console/login`);
    await page.getByLabel('Username').fill('alice');
    await page.getByLabel('Password').fill(PASSWORD);
    await page.getByLabel('Code from your authenticator app').fill('000000');
    await page.getByRole('button', { name: 'Sign in' }).click();
    expect(await page.getByRole('alert').textContent()).toContain('Wrong username, password or code');
    await shot(page, 'login');
    await signIn(page, 'alice');
    const cookie = (await owner.cookies()).find((c) => c.name === 'pixgate_console')!;
    expect(cookie.httpOnly).toBe(true);
    expect(cookie.sameSite).toBe('Strict');
    const stored = await s.ctx.db.query<{ token_hash: string }>('SELECT token_hash FROM console_sessions');
    expect(stored.map((r) => r.token_hash)).not.toContain(cookie.value);
    expect(await page.getByTestId('operator').textContent()).toContain('alice · owner');
  });

  it('finds the payment by its end-to-end id and shows its timeline; merchant values stay text', async () => {
    await page.getByLabel(/Merchant, account, transaction id/).fill(payoutE2e);
    await page.getByRole('button', { name: 'Search' }).click();
    await shot(page, 'search');
    await page.getByRole('link', { name: payoutId }).click();
    await page.waitForURL(`**/console/transactions/${payoutId}`);
    expect(await page.getByTestId('e2e').textContent()).toBe(payoutE2e);
    expect(await page.getByTestId('description').textContent()).toBe(`Pedido ${XSS}`);
    expect(await page.locator('table[data-testid=timeline] tr[data-kind=ledger]').count()).toBeGreaterThan(0);
    expect(await page.locator('table[data-testid=timeline] tr[data-kind=request]').count()).toBe(1);
    expect(await page.locator('table[data-testid=timeline] tr[data-kind=record]').count()).toBeGreaterThan(1);
    await noXss(page);
    await shot(page, 'transaction');
    // Other identifiers: the document, the account id, the merchant name.
    await page.goto(`${s.url}/console?q=${a.accountId}`);
    expect(await page.getByTestId('results').textContent()).toContain(`account ${a.accountId}`);
    await noXss(page);
  });

  it('credits a deposit once although the form is sent twice, with its reason', async () => {
    await page.goto(`${s.url}/console/accounts/${a.accountId}`);
    const before = await balances(s.ctx.db, a.accountId);
    await page.getByLabel('Amount (R$)').fill('1.234,56');
    await page.getByLabel(/^Reason/).fill(`Aporte ${XSS}`);
    const form = page.locator(`form[action="/console/accounts/${a.accountId}/deposit"]`);
    const fields: Record<string, string> = {};
    for (const input of await form.locator('input').all()) fields[(await input.getAttribute('name'))!] = await input.inputValue();
    await form.getByRole('button', { name: 'Credit the deposit' }).click();
    expect(await page.getByRole('status').textContent()).toMatch(/Deposit .* of R\$ 1\.234,56 credited/);
    // The same form again (a double submit), as the browser would send it.
    const again = await owner.request.post(`${s.url}/console/accounts/${a.accountId}/deposit`, { form: fields, headers: { origin: s.url, 'accept-language': 'en-US' }, maxRedirects: 0 });
    expect(again.status()).toBe(303);
    await page.goto(`${s.url}/console/accounts/${a.accountId}`);
    expect(await page.getByRole('status').textContent()).toContain('credited once');
    const after = await balances(s.ctx.db, a.accountId);
    expect(Number(after.available) - Number(before.available)).toBe(123_456 * 100);
    const deposits = await s.ctx.db.query<{ n: number }>(`SELECT count(*)::int AS n FROM transactions WHERE account_id = $1 AND kind = 'deposit'`, [a.accountId]);
    expect(deposits[0]!.n).toBe(2); // the fixture's and this one
    await noXss(page);
    await shot(page, 'account');
  });

  it('changes a limit through the same domain function as the admin API, audited', async () => {
    await page.goto(`${s.url}/console/accounts/${a.accountId}`);
    await page.getByLabel('Daily (R$)').fill('5.000,00');
    await page.getByRole('button', { name: 'Change the limits' }).click();
    expect(await page.getByRole('status').textContent()).toContain('Limits changed');
    const acc = await s.admin('GET', `/accounts/${a.accountId}`);
    expect(acc.body.cash_out_daily_limit_cents).toBe(500_000);
    const [row] = await s.ctx.db.query<{ status: number; target: Record<string, unknown> }>(`SELECT status, target FROM admin_audit_log WHERE route = '/console/accounts/:id/limits'`);
    expect(row).toMatchObject({ status: 200, target: { account_id: a.accountId, cash_out_daily_limit_cents: 500_000 } });
  });

  it('two posts of one deposit form at the same moment credit once', async () => {
    await page.goto(`${s.url}/console/accounts/${a.accountId}`);
    const form = page.locator(`form[action="/console/accounts/${a.accountId}/deposit"]`);
    const fields: Record<string, string> = { amount: '7,00', reason: 'concurrent' };
    for (const name of ['_csrf', 'idempotency_id']) fields[name] = await form.locator(`input[name=${name}]`).inputValue();
    const before = await balances(s.ctx.db, a.accountId);
    const posts = await Promise.all([1, 2, 3].map(() => owner.request.post(`${s.url}/console/accounts/${a.accountId}/deposit`, { form: fields, headers: { origin: s.url, 'accept-language': 'en-US' }, maxRedirects: 0 })));
    expect(posts.map((p) => p.status())).toEqual([303, 303, 303]);
    const after = await balances(s.ctx.db, a.accountId);
    expect(Number(after.available) - Number(before.available)).toBe(700 * 100);
  });

  it('fires webhook.test at the merchant webhook and sees it delivered to the local receiver', async () => {
    await page.goto(`${s.url}/console/webhooks`);
    await noXss(page);
    await shot(page, 'webhooks');
    await page.locator(`tr[data-webhook-id="${webhookId}"]`).getByRole('button', { name: 'Send webhook.test' }).click();
    expect(await page.getByRole('status').textContent()).toContain('webhook.test queued');
    await receiver.waitFor((r) => r.some((x) => x.body?.event === 'webhook.test'));
    await waitFor(
      async () => (await s.ctx.db.query<{ n: number }>(`SELECT count(*)::int AS n FROM webhook_deliveries WHERE webhook_id = $1 AND event = 'webhook.test' AND status = 'delivered'`, [webhookId]))[0]!.n,
      (n) => n === 1,
    );
    await page.goto(`${s.url}/console/webhooks/${webhookId}`);
    expect(await page.getByTestId('deliveries').textContent()).toMatch(/webhook\.test\s*delivered/);
    // The list as CSV: the merchant's name as a quoted cell, a leading formula character neutralised.
    const csv = (await (await owner.request.get(`${s.url}/console/webhooks.csv`)).text()).split('\r\n');
    expect(csv[0]).toContain('webhook_id,merchant_id,merchant_name,url');
    expect(csv[1]).toContain(`"${webhookId}"`);
    expect(csv[1]).toContain(`"Padaria ${XSS.replace(/"/g, '""')}"`);
    await noXss(page);
    await shot(page, 'webhook');
  });

  it("finds those actions in the audit log under the operator's name, and exports them as CSV", async () => {
    await page.goto(`${s.url}/console/audit?operator=alice`);
    const text = (await page.getByTestId('audit').textContent())!;
    expect(text).toContain('operator:alice');
    expect(text).toContain('/console/accounts/:id/deposit');
    expect(text).toContain('/console/webhooks/:id/test');
    // Two deposit posts, both audited; the second names the same transaction, replayed.
    const rows = await s.ctx.db.query<{ target: { transaction_id?: string; replayed?: boolean }; status: number }>(
      `SELECT target, status FROM admin_audit_log WHERE actor = 'operator:alice' AND route = '/console/accounts/:id/deposit' ORDER BY id`,
    );
    expect(rows.slice(0, 2).map((r) => [r.status, r.target.replayed])).toEqual([[200, false], [200, true]]);
    // The three concurrent posts: three rows, one deposit made, two answered with it.
    expect(rows.slice(2).map((r) => r.target.replayed).sort()).toEqual([false, true, true]);
    expect(rows[0]!.target.transaction_id).toBe(rows[1]!.target.transaction_id);
    await noXss(page);
    await shot(page, 'audit');
    const csv = await owner.request.get(`${s.url}/console/audit.csv?operator=alice&action=test`);
    expect(csv.headers()['content-type']).toContain('text/csv');
    const lines = (await csv.text()).trim().split('\r\n');
    expect(lines[0]).toBe('id,at,actor,client_ip,method,route,target,request_id,status');
    expect(lines.slice(1).every((l) => l.includes('"operator:alice"') && l.includes('/console/webhooks/:id/test'))).toBe(true);
    expect(lines.length).toBe(2);
    // The bootstrap is there too, under the admin token's actor.
    await page.goto(`${s.url}/console/audit?action=bootstrap`);
    expect(await page.getByTestId('audit').textContent()).toMatch(/admin-token:[0-9a-f]{12}/);
  });

  it('lists open MED cases by defense deadline', async () => {
    await page.goto(`${s.url}/console/med`);
    expect(await page.locator('table[data-testid=med] tbody tr').count()).toBe(1);
    expect(await page.getByTestId('med').textContent()).toContain('R$ 10,00');
    await noXss(page);
    await shot(page, 'med');
    // With the simulated rail, the owner plays the central bank's decision; the case leaves the queue.
    await page.getByLabel('Decision').selectOption('rejected');
    await page.getByRole('button', { name: 'Resolve' }).click();
    expect(await page.getByRole('status').textContent()).toContain('resolved: rejected');
    await waitFor(async () => (await s.ctx.db.query<{ status: string }>('SELECT status FROM med_infractions'))[0]!.status, (st) => st === 'CLOSED');
    await page.goto(`${s.url}/console/med`);
    expect(await page.locator('main').textContent()).toContain('No open MED case');
    const [row] = await s.ctx.db.query<{ actor: string; status: number }>(`SELECT actor, status FROM admin_audit_log WHERE route = '/console/med/:id/resolve'`);
    expect(row).toEqual({ actor: 'operator:alice', status: 200 });
  });

  it("shows the rail simulator's state and controls, and the pages in pt-BR (screenshots)", async () => {
    await page.goto(`${s.url}/console/simulator`);
    expect(await page.getByTestId('sim-state').isVisible()).toBe(true);
    expect(Number(await page.getByTestId('sim-keys').textContent())).toBeGreaterThanOrEqual(0);
    await noXss(page);
    await shot(page, 'simulator');
    await page.goto(`${s.url}/console/language?to=pt-BR&next=/console/accounts/${a.accountId}`);
    expect(await page.locator('html').getAttribute('lang')).toBe('pt-BR');
    expect(await page.locator('main').textContent()).toContain('Disponível');
    await shot(page, 'account-pt-BR');
    await page.goto(`${s.url}/console/simulator`);
    expect(await page.locator('h1').first().textContent()).toContain('Simulador do SPI');
    await shot(page, 'simulator-pt-BR');
    await page.goto(`${s.url}/console/language?to=en&next=/console`);
    expect(await page.locator('html').getAttribute('lang')).toBe('en');
  });

  it('refuses a post without the CSRF token and one from another origin', async () => {
    const fields = { amount: '10', reason: 'x', idempotency_id: '00000000-0000-4000-8000-000000000001' };
    const noToken = await owner.request.post(`${s.url}/console/accounts/${a.accountId}/deposit`, { form: fields, headers: { origin: s.url, 'accept-language': 'en-US' }, maxRedirects: 0 });
    expect(noToken.status()).toBe(403);
    expect(await noToken.text()).toContain('CSRF');
    await page.goto(`${s.url}/console/accounts/${a.accountId}`);
    const csrf = await page.locator('input[name=_csrf]').first().inputValue();
    const foreign = await owner.request.post(`${s.url}/console/accounts/${a.accountId}/deposit`, { form: { ...fields, _csrf: csrf }, headers: { origin: 'http://evil.example', 'accept-language': 'en-US' }, maxRedirects: 0 });
    expect(foreign.status()).toBe(403);
    expect(await foreign.text()).toContain('Cross-site');
    const n = await s.ctx.db.query<{ n: number }>(`SELECT count(*)::int AS n FROM transactions WHERE account_id = $1 AND kind = 'deposit'`, [a.accountId]);
    expect(n[0]!.n).toBe(3); // the fixture's, the double-submitted and the concurrent one
  });

  it('each role sees what it may and is refused the rest, server-side', async () => {
    await page.goto(`${s.url}/console/operators`);
    for (const role of ['operations', 'support', 'compliance'] as const) {
      await page.getByLabel('Username').fill(role);
      await page.getByLabel(/^Initial password/).fill(PASSWORD);
      await page.getByLabel('Role').selectOption(role);
      await page.getByRole('button', { name: 'Create the operator' }).click();
      secrets[role] = (await page.getByTestId('totp-secret').textContent())!;
      if (role === 'compliance') await shot(page, 'operator-created');
      await page.goto(`${s.url}/console/operators`);
    }
    await shot(page, 'operators');

    /** What each role gets: [path or action, expected status]. */
    const expectations: Record<'operations' | 'support' | 'compliance', { audit: number; operators: number; deposit: number; limits: number; test: number; depositForm: boolean }> = {
      operations: { audit: 403, operators: 403, deposit: 303, limits: 303, test: 303, depositForm: true },
      support: { audit: 403, operators: 403, deposit: 403, limits: 403, test: 303, depositForm: false },
      compliance: { audit: 200, operators: 403, deposit: 403, limits: 403, test: 403, depositForm: false },
    };
    for (const [role, want] of Object.entries(expectations)) {
      const ctx = await browser.newContext({ viewport: { width: 1280, height: 800 }, locale: 'en-US' });
      const p = await ctx.newPage();
      await signIn(p, role);
      for (const path of ['/console', `/console/accounts/${a.accountId}`, `/console/transactions/${payoutId}`, '/console/webhooks', '/console/med']) {
        expect((await p.goto(`${s.url}${path}`))!.status(), `${role} ${path}`).toBe(200);
      }
      expect(await p.locator(`form[action="/console/accounts/${a.accountId}/deposit"]`).count()).toBe(0); // on /console/webhooks
      await p.goto(`${s.url}/console/accounts/${a.accountId}`);
      expect(await p.locator(`form[action="/console/accounts/${a.accountId}/deposit"]`).count(), role).toBe(want.depositForm ? 1 : 0);
      const csrf = await p.locator('input[name=_csrf]').first().inputValue();
      expect((await p.goto(`${s.url}/console/audit`))!.status(), `${role} audit`).toBe(want.audit);
      expect((await ctx.request.get(`${s.url}/console/audit.csv`)).status(), `${role} csv`).toBe(want.audit);
      expect((await p.goto(`${s.url}/console/operators`))!.status(), `${role} operators`).toBe(want.operators);
      if (role === 'support') await shot(p, 'refused');
      const post = (path: string, form: Record<string, string>) => ctx.request.post(`${s.url}${path}`, { form: { _csrf: csrf, ...form }, headers: { origin: s.url, 'accept-language': 'en-US' }, maxRedirects: 0 });
      const dep = await post(`/console/accounts/${a.accountId}/deposit`, { amount: '1,00', reason: `by ${role}`, idempotency_id: crypto.randomUUID() });
      expect(dep.status(), `${role} deposit`).toBe(want.deposit);
      expect((await post(`/console/webhooks/${webhookId}/test`, {})).status(), `${role} webhook.test`).toBe(want.test);
      expect((await post(`/console/accounts/${a.accountId}/limits`, { daily: '6.000,00' })).status(), `${role} limits`).toBe(want.limits);
      expect((await post(`/console/med/00000000-0000-4000-8000-000000000000/resolve`, { decision: 'accepted' })).status(), `${role} MED`).toBe(want.limits);
      expect((await post('/console/operators', { username: `x${role}`, password: PASSWORD, role: 'owner' })).status(), `${role} new operator`).toBe(403);
      await ctx.close();
    }
    const made = await s.ctx.db.query<{ username: string }>('SELECT username FROM console_operators ORDER BY id');
    expect(made.map((r) => r.username)).toEqual(['alice', 'operations', 'support', 'compliance']);
  }, 120_000);

  it('the owner disables an operator: their open session ends at once and they cannot sign in', async () => {
    const ctx = await browser.newContext({ viewport: { width: 1280, height: 800 }, locale: 'en-US' });
    const p = await ctx.newPage();
    await signIn(p, 'support');
    await page.goto(`${s.url}/console/operators`);
    expect(await page.locator('tr[data-operator=alice] button').count()).toBe(0); // not oneself
    await page.locator('tr[data-operator=support]').getByRole('button', { name: 'Disable' }).click();
    expect(await page.getByRole('status').textContent()).toContain('support disabled');
    await p.goto(`${s.url}/console`);
    expect(p.url()).toBe(`${s.url}/console/login`);
    await p.getByLabel('Username').fill('support');
    await p.getByLabel('Password').fill(PASSWORD);
    await p.getByLabel('Code from your authenticator app').fill(code(secrets.support!));
    await p.getByRole('button', { name: 'Sign in' }).click();
    expect(await p.getByRole('alert').textContent()).toContain('Wrong username, password or code');
    await ctx.close();
  }, 120_000);
});
