import { existsSync, mkdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium, type Browser, type BrowserContext, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { totpCode } from '../../src/auth/totp.js';
import { ApiClient, merchantWithKey, type MerchantFixture } from '../helpers/client.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

/**
 * API keys and team members in a real headless browser (Debian's chromium, playwright-core): the
 * first owner created from an API key session, the invitation link, a member's sign-in with a
 * password and a TOTP code, step-up before a sensitive action, a key rotated with a grace period
 * (both secrets answer the API during the grace, the old one not after), revocation, a role
 * refused an action, and CSRF on the new forms. Screenshots at 390 and 1280 px go to docs/portal/
 * (PORTAL_SCREENSHOTS=1) or a temporary folder.
 */
const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
const SHOTS = process.env.PORTAL_SCREENSHOTS ? join(import.meta.dirname, '..', '..', 'docs', 'portal') : join(tmpdir(), 'pixgate-portal-shots');
const haveChromium = existsSync(CHROMIUM);
if (!haveChromium && process.env.CI) throw new Error(`${CHROMIUM} is missing: .ci/run installs it with apt-get`);
const PASSWORD = 'uma senha bem comprida';

describe.skipIf(!haveChromium)('API keys and team members in chromium', () => {
  let s: TestServer;
  let m: MerchantFixture;
  let browser: Browser;
  let owner: BrowserContext;
  let page: Page;
  let offsetMs = 0;
  const clock = { now: () => new Date(Date.now() + offsetMs) };
  let ownerSecret = '';
  let rotated: { clientId: string; old: string; fresh: string };

  /** The page at 1280 px and at 390 px, full length. */
  const shots = async (p: Page, name: string) => {
    mkdirSync(SHOTS, { recursive: true });
    await p.setViewportSize({ width: 1280, height: 800 });
    await p.screenshot({ path: join(SHOTS, `${name}.png`), fullPage: true });
    await p.setViewportSize({ width: 390, height: 844 });
    await p.screenshot({ path: join(SHOTS, `${name}-phone.png`), fullPage: true });
    // Nothing is wider than the phone's screen but the tables' own scrolling boxes.
    const overflow = await p.evaluate(`document.documentElement.scrollWidth`);
    expect(overflow).toBeLessThanOrEqual(390);
    await p.setViewportSize({ width: 1280, height: 800 });
  };
  const code = (secret: string) => totpCode(secret, clock.now());
  const status = (p: Page) => p.getByRole('status').first().textContent();

  beforeAll(async () => {
    s = await startTestServer({ clock, env: { RATE_LIMIT_PER_MINUTE: '1000' } });
    m = await merchantWithKey(s, { name: 'Padaria Pão Quente', depositCents: 50_000 });
    browser = await chromium.launch({
      executablePath: CHROMIUM,
      headless: true,
      args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage', '--disable-background-networking', '--disable-extensions', '--no-first-run', '--mute-audio'],
    });
    owner = await browser.newContext({ viewport: { width: 1280, height: 800 }, locale: 'en-US' });
    page = await owner.newPage();
  }, 60_000);

  afterAll(async () => {
    await browser?.close();
    await s?.close();
  });

  /** Opens an invitation link, chooses the password and signs in with it (email + password). */
  async function acceptAndSignIn(p: Page, link: string, email: string) {
    await p.goto(link);
    await p.getByLabel(/New password/).fill(PASSWORD);
    await p.getByRole('button', { name: 'Save and go to sign-in' }).click();
    expect(await status(p)).toContain('Password saved');
    await p.getByLabel('Password').fill(PASSWORD);
    expect(await p.getByLabel('Email').inputValue()).toBe(email);
    await p.getByRole('button', { name: 'Sign in' }).click();
  }

  it('an API key session creates the first owner, who sets a password from the one-time link and signs in', async () => {
    await page.goto(`${s.url}/portal/login`);
    await page.getByLabel('Client ID').fill(m.client.clientId);
    await page.getByLabel('Client secret').fill(m.client.clientSecret);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.goto(`${s.url}/portal/team`);
    await page.getByLabel('Email').fill('dona@padaria.example');
    await page.getByLabel('Name').fill('Dona Rosa');
    await page.getByRole('button', { name: 'Create the owner' }).click();
    const link = (await page.getByTestId('invite-link').textContent())!;
    expect(link).toMatch(new RegExp(`^${s.url}/portal/invite/[A-Za-z0-9_-]{43}$`));
    await page.goto(`${s.url}/portal/team`); // the key cannot create a second owner
    expect(await page.locator('main').textContent()).toContain('managed by its owner');
    await page.getByRole('button', { name: 'Sign out' }).click();
    await page.goto(link);
    await shots(page, 'invite');
    await acceptAndSignIn(page, link, 'dona@padaria.example');
    await page.waitForURL('**/portal/balance');
    expect(await page.locator('header').textContent()).toContain('dona@padaria.example');
    await page.goto(link); // the link worked once
    expect(await page.locator('main').textContent()).toContain('not valid');
  });

  it('a sensitive action asks for the second factor: set it up, then the step-up lets the rotation through', async () => {
    await page.goto(`${s.url}/portal/keys`);
    expect(await page.locator(`tr[data-client-id="${m.client.clientId}"]`).count()).toBe(1);
    await page.locator(`form[action="/portal/keys/${m.client.clientId}/rotate"] button`).click();
    await page.waitForURL('**/portal/step-up?next=*');
    expect(await page.locator('main').textContent()).toContain('set yours up first');
    await page.getByRole('link', { name: 'Set up the second factor' }).click();
    ownerSecret = (await page.getByTestId('totp-secret').textContent())!;
    expect(await page.getByTestId('totp-qr').getAttribute('src')).toMatch(/^data:image\/png;base64,/);
    expect(ownerSecret).toMatch(/^[A-Z2-7]{32}$/);
    await shots(page, 'totp-setup');
    await page.getByLabel('Code from your authenticator app').fill('000000');
    await page.getByRole('button', { name: 'Confirm' }).click();
    expect(await page.getByRole('alert').first().textContent()).toContain('not valid');
    await page.getByLabel('Code from your authenticator app').fill(code(ownerSecret));
    await page.getByRole('button', { name: 'Confirm' }).click();
    await page.waitForURL('**/portal/balance');
    expect(await status(page)).toContain('Second factor set up');
  });

  it('rotates a key with a grace: both secrets answer the API during it, the old one not after; the event and audit row are written', async () => {
    const old = m.client.clientSecret;
    expect((await m.client.get('/balance')).status).toBe(200); // a use, for "last used"
    await page.goto(`${s.url}/portal/keys`);
    const row = page.locator(`tr[data-client-id="${m.client.clientId}"]`);
    expect(await row.getByTestId('last-used').textContent()).toMatch(/127\.0\.0\.1|::1/);
    await row.getByLabel('Old secret keeps working for').selectOption({ label: '1 hour' });
    await row.getByRole('button', { name: 'Rotate' }).click();
    expect(await status(page)).toContain('The old secret keeps working until');
    const fresh = (await page.getByTestId('client-secret').textContent())!;
    expect(fresh).toMatch(/^sk_/);
    expect(fresh).not.toBe(old);
    await shots(page, 'key-secret');
    rotated = { clientId: m.client.clientId, old, fresh };
    const withOld = new ApiClient(s.url, m.client.clientId, old);
    const withNew = new ApiClient(s.url, m.client.clientId, fresh);
    expect((await withOld.get('/balance')).status).toBe(200);
    expect((await withNew.get('/balance')).status).toBe(200);
    await page.goto(`${s.url}/portal/keys`);
    expect(await row.textContent()).toContain('the old secret works until');
    await shots(page, 'keys');
    offsetMs += 3600_000 + 1_000; // the grace is over
    expect((await withOld.get('/balance')).status).toBe(401);
    expect((await withNew.get('/balance')).status).toBe(200);
    await page.goto(`${s.url}/portal/keys`);
    expect(await row.textContent()).not.toContain('rotating');
    const events = await s.ctx.db.query<{ event: string }>('SELECT event FROM outbox_events WHERE subject = $1 ORDER BY id', [m.client.clientId]);
    expect(events.map((e) => e.event)).toEqual(['api_key.rotated', 'api_key.rotation_completed']);
    const audit = await s.ctx.db.query<{ action: string; actor: string }>(`SELECT action, actor FROM merchant_audit_log WHERE target->>'client_id' = $1 ORDER BY id`, [m.client.clientId]);
    expect(audit[0]).toEqual({ action: 'api_key.rotated', actor: expect.stringContaining('dona@padaria.example') });
  });

  it('creates a key (the secret shown once), then revokes it: refused at once', async () => {
    await page.goto(`${s.url}/portal/keys`);
    await page.getByLabel('Name', { exact: true }).fill('ERP');
    await page.getByRole('button', { name: 'Create key' }).click();
    // The step-up of the rotation is an hour old: the second factor is asked again.
    await page.waitForURL('**/portal/step-up?next=*');
    await shots(page, 'step-up');
    await page.getByLabel('Code from your authenticator app').fill(code(ownerSecret));
    await page.getByRole('button', { name: 'Confirm' }).click();
    await page.waitForURL('**/portal/keys');
    expect(await status(page)).toContain('Send the form again');
    await page.getByLabel('Name', { exact: true }).fill('ERP');
    await page.getByRole('button', { name: 'Create key' }).click();
    const clientId = (await page.getByTestId('client-id').textContent())!;
    const secret = (await page.getByTestId('client-secret').textContent())!;
    const erp = new ApiClient(s.url, clientId, secret);
    expect((await erp.get('/balance')).status).toBe(200);
    await page.goto(`${s.url}/portal/keys`);
    expect(await page.locator('main').textContent()).not.toContain(secret); // shown once
    await page.locator(`tr[data-client-id="${clientId}"]`).getByRole('button', { name: 'Revoke' }).click();
    expect(await status(page)).toContain('Key revoked');
    expect((await erp.get('/balance')).body).toEqual({ error: { status: 401, message: 'API key is inactive' } });
  });

  it('refuses the new forms without the CSRF token or from another origin', async () => {
    const fields = await page.evaluate<Record<string, string>>(
      `Object.fromEntries([...document.querySelector('form[action="/portal/keys"]').elements].filter((e) => e.name).map((e) => [e.name, e.value]))`,
    );
    const { _csrf, ...noToken } = fields;
    expect(_csrf).toBeTruthy();
    const keysBefore = (await s.ctx.db.query('SELECT client_id FROM api_keys WHERE merchant_id = $1', [m.merchantId])).length;
    for (const path of ['/portal/keys', `/portal/keys/${rotated.clientId}/rotate`, `/portal/keys/${rotated.clientId}/revoke`, '/portal/team/invite', '/portal/team/settings']) {
      const res = await page.request.post(`${s.url}${path}`, { form: { ...noToken, email: 'x@example.com', role: 'admin' }, maxRedirects: 0 });
      expect(res.status(), path).toBe(403);
      expect(await res.text()).toContain('CSRF');
      const foreign = await page.request.post(`${s.url}${path}`, { form: fields, headers: { origin: 'https://evil.example' }, maxRedirects: 0 });
      expect(foreign.status(), path).toBe(403);
    }
    expect((await s.ctx.db.query('SELECT client_id FROM api_keys WHERE merchant_id = $1', [m.merchantId])).length).toBe(keysBefore);
    expect((await new ApiClient(s.url, rotated.clientId, rotated.fresh).get('/balance')).status).toBe(200);
  });

  it('a member signs in with a TOTP code (the owner requires it), and their role is refused what it does not allow', async () => {
    await page.goto(`${s.url}/portal/team`);
    await page.getByLabel(/Require a second factor/).check();
    await page.getByRole('button', { name: 'Save' }).click();
    expect(await status(page)).toContain('now required');
    const invite = page.locator('form[action="/portal/team/invite"]');
    await invite.getByLabel('Email').fill('caixa@padaria.example');
    await invite.getByLabel('Role').selectOption('viewer');
    await invite.getByRole('button', { name: 'Invite' }).click();
    const link = (await page.getByTestId('invite-link').textContent())!;
    await page.goto(`${s.url}/portal/team`);
    await shots(page, 'team');

    const viewerContext = await browser.newContext({ viewport: { width: 1280, height: 800 }, locale: 'en-US' });
    const v = await viewerContext.newPage();
    try {
      await acceptAndSignIn(v, link, 'caixa@padaria.example');
      // Required by the owner: the first sign-in sets the factor up before any page opens.
      await v.waitForURL('**/portal/account/totp');
      expect(await v.locator('main').textContent()).toContain('The owner requires a second factor');
      expect((await v.request.get(`${s.url}/portal/balance`, { maxRedirects: 0 })).headers().location).toBe('/portal/account/totp');
      const secret = (await v.getByTestId('totp-secret').textContent())!;
      await v.getByLabel('Code from your authenticator app').fill(code(secret));
      await v.getByRole('button', { name: 'Confirm' }).click();
      await v.waitForURL('**/portal/balance');
      await v.getByRole('button', { name: 'Sign out' }).click();
      // Signing in again: password, then a code of the next step (the last one was spent).
      offsetMs += 30_000;
      await v.goto(`${s.url}/portal/signin`);
      await shots(v, 'member-sign-in');
      await v.getByLabel('Email').fill('caixa@padaria.example');
      await v.getByLabel('Password').fill(PASSWORD);
      await v.getByRole('button', { name: 'Sign in' }).click();
      await v.waitForURL('**/portal/signin/totp');
      expect((await v.request.get(`${s.url}/portal/balance`, { maxRedirects: 0 })).headers().location).toBe('/portal/signin/totp');
      await shots(v, 'sign-in-totp');
      await v.getByLabel('Code from your authenticator app').fill(code(secret));
      await v.getByRole('button', { name: 'Confirm' }).click();
      await v.waitForURL('**/portal/balance');
      // A viewer: no keys, no team changes, no TEF; the navigation does not offer them.
      expect(await v.locator('nav').textContent()).not.toContain('API keys');
      const keys = await v.goto(`${s.url}/portal/keys`);
      expect(keys!.status()).toBe(403);
      expect(await v.locator('main').textContent()).toContain('Your role (Viewer) does not allow keys:read');
      await v.goto(`${s.url}/portal/balance`);
      const csrf = await v.locator('header input[name="_csrf"]').getAttribute('value');
      const revoke = await v.request.post(`${s.url}/portal/keys/${rotated.clientId}/revoke`, { form: { _csrf: csrf!, _form: 'A'.repeat(22) }, maxRedirects: 0 });
      expect(revoke.status()).toBe(403);
      const tef = await v.request.post(`${s.url}/portal/tef`, { form: { _csrf: csrf!, _form: 'B'.repeat(22), amount: '1,00', pix_key: 'x' }, maxRedirects: 0 });
      expect(tef.status()).toBe(403);
      expect((await new ApiClient(s.url, rotated.clientId, rotated.fresh).get('/balance')).status).toBe(200);
    } finally {
      await viewerContext.close();
    }
  });

  it('speaks Portuguese on the new pages', async () => {
    await page.goto(`${s.url}/portal/language?to=pt-BR&next=${encodeURIComponent('/portal/keys')}`);
    await page.waitForURL('**/portal/keys');
    expect(await page.locator('html').getAttribute('lang')).toBe('pt-BR');
    expect(await page.locator('h1').textContent()).toBe('Chaves de API');
    expect(await page.getByRole('button', { name: 'Rotacionar' }).count()).toBeGreaterThan(0);
    await page.goto(`${s.url}/portal/team`);
    expect(await page.locator('h1').textContent()).toBe('Equipe');
    expect(await page.locator('main').textContent()).toContain('O que cada papel pode fazer');
    await shots(page, 'team-pt');
    await page.goto(`${s.url}/portal/language?to=en&next=${encodeURIComponent('/portal/team')}`);
  });

  it('a removed member can no longer sign in (their sessions are deleted with the removal)', async () => {
    const viewerContext = await browser.newContext({ locale: 'en-US' });
    try {
      await page.goto(`${s.url}/portal/team`);
      const row = page.locator('tr[data-member="caixa@padaria.example"]');
      await row.getByRole('button', { name: 'Remove' }).click();
      // Removing a member is sensitive: the step-up may be asked again.
      if (page.url().includes('/portal/step-up')) {
        await page.getByLabel('Code from your authenticator app').fill(code(ownerSecret));
        await page.getByRole('button', { name: 'Confirm' }).click();
        await page.locator('tr[data-member="caixa@padaria.example"]').getByRole('button', { name: 'Remove' }).click();
      }
      expect(await status(page)).toContain('Member removed');
      const res = await viewerContext.request.post(`${s.url}/portal/signin`, { form: { email: 'caixa@padaria.example', password: PASSWORD }, maxRedirects: 0 });
      expect(res.status()).toBe(401);
    } finally {
      await viewerContext.close();
    }
  });
});
