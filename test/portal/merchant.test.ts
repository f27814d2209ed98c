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

  /** The signed-in session's cookie (one sign-in: the portal allows 5 a minute per address). */
  let session: Awaited<ReturnType<import('playwright-core').BrowserContext['storageState']>> | undefined;
  const newPage = async (locale: 'pt-BR' | 'en-US', width: number, anonymous = false): Promise<Page> => {
    const context = await browser.newContext({
      viewport: { width, height: 900 },
      locale,
      ...(width < 500 ? { isMobile: true, deviceScaleFactor: 1 } : {}),
      ...(session && !anonymous ? { storageState: session } : {}),
    });
    const p = await context.newPage();
    p.on('dialog', () => {
      throw new Error('a dialog opened: script ran');
    });
    return p;
  };
  const signIn = async (p: Page) => {
    if (session) {
      await p.goto(`${s.url}/portal/balance`);
      expect(p.url()).toContain('/portal/balance');
      return;
    }
    await p.goto(`${s.url}/portal/login`);
    await p.locator('input[name=client_id]').fill(a.client.clientId);
    await p.locator('input[name=client_secret]').fill(a.client.clientSecret);
    await Promise.all([p.waitForURL('**/portal/balance'), p.locator('form[action="/portal/login"] button').click()]);
    session = await p.context().storageState();
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
          if (lang === 'pt-BR') {
            // every text of the page from its Portuguese dictionary: none of the English words left
            const text = await p.locator('body').innerText();
            expect({ name, english: text.match(/\b(Amount|Status|Description|Sign out|Balance|Statement|Events|Delete|Submit|Transaction|Created|Payer|Receiver|Not found)\b/g) }).toEqual({ name, english: null });
          }
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
        const anon = await newPage(locale, width, true);
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
  it('a receipt verifies on the public page: valid with what the receipt shows, a tampered code or id invalid', async () => {
    const p = await newPage('pt-BR', 1280);
    await signIn(p);
    await p.goto(`${s.url}/portal/transactions/${payoutId}`);
    await p.getByTestId('receipt-link').click();
    expect(await p.getByTestId('receipt-amount').textContent()).toBe('R$ 15,00');
    expect(await p.getByTestId('receipt-e2e').textContent()).toBe(payoutE2e);
    expect(await p.getByTestId('receipt-receiver').textContent()).toContain('Fornecedor Ltda');
    expect(await p.getByTestId('receipt-payer').textContent()).toContain(`Padaria ${XSS}`); // as text
    const code = (await p.getByTestId('receipt-code').textContent())!;
    expect(code).toMatch(/^1-[0-9A-HJKMNP-TV-Z]{4}(-[0-9A-HJKMNP-TV-Z]{4}){3}$/);
    const href = (await p.getByTestId('verify-link').getAttribute('href'))!;
    await p.context().close();

    const anon = await newPage('en-US', 390, true); // no session, no API key
    const valid = await anon.goto(`${s.url}${href}`);
    expect(valid!.status()).toBe(200);
    expect(await anon.getByTestId('verdict').getAttribute('data-valid')).toBe('true');
    expect(await anon.getByTestId('receipt-amount').textContent()).toBe('R$ 15,00');
    expect(await anon.getByTestId('receipt-code').textContent()).toBe(code);
    expect(await anon.locator('nav').count()).toBe(0);
    // what the verification shows is what the receipt shows: no balance, no account, no key
    expect(await anon.locator('main').textContent()).not.toMatch(/Balance|Saldo|cli_/);
    // lower case and without dashes is the same code
    await anon.goto(`${s.url}/portal/receipts/verify?e2e=${payoutE2e}&code=${code.replaceAll('-', '').toLowerCase()}`);
    expect(await anon.getByTestId('verdict').getAttribute('data-valid')).toBe('true');
    // what the visitor typed comes back as text
    await anon.goto(`${s.url}/portal/receipts/verify?e2e=${encodeURIComponent(XSS)}&code=${encodeURIComponent(XSS)}`);
    await noXss(anon);
    const last = code.at(-1) === 'A' ? 'B' : 'A';
    for (const [e2e, c] of [
      [payoutE2e, code.slice(0, -1) + last], // tampered code
      [payoutE2e.slice(0, -1) + (payoutE2e.at(-1) === 'A' ? 'B' : 'A'), code], // tampered id
      ['E00000000000000000000000000000000', code], // unknown id
      [payoutE2e, '2-' + code.slice(2)], // unknown key id
    ]) {
      const res = await anon.goto(`${s.url}/portal/receipts/verify?e2e=${encodeURIComponent(e2e!)}&code=${encodeURIComponent(c!)}`);
      expect(res!.status()).toBe(404);
      expect(await anon.getByTestId('verdict').getAttribute('data-valid')).toBe('false');
      expect(await anon.getByTestId('receipt-amount').count()).toBe(0);
      expect(await anon.locator('main').textContent()).not.toContain('Fornecedor');
    }
    await anon.context().close();
    // a payment that is not a settled PIX has no receipt
    const portal = await newPage('en-US', 1280);
    await signIn(portal);
    const [deposit] = await s.ctx.db.query<{ t: string }>(`SELECT transaction_id AS t FROM transactions WHERE account_id = $1 AND type = 'internal'`, [a.accountId]);
    expect((await portal.goto(`${s.url}/portal/transactions/${deposit!.t}/receipt`))!.status()).toBe(422);
    await portal.context().close();
  });

  it('names field errors by field, keeps what was typed (never a secret), in both languages', async () => {
    for (const [locale, events, blank] of [
      ['en-US', 'Events', "can't be blank"],
      ['pt-BR', 'Eventos', 'não pode ficar em branco'],
    ] as const) {
      const p = await newPage(locale, 1280);
      await signIn(p);
      await p.goto(`${s.url}/portal/webhooks`);
      await p.locator('input[name=url]').fill('https://example.com/other');
      await p.locator('input[name=description]').fill(XSS);
      await p.locator('input[name=secret]').fill('a-typed-secret-of-enough-length');
      await p.locator('form[action="/portal/webhooks"] button[type=submit]').click();
      const alert = (await p.getByRole('alert').first().textContent())!;
      expect(alert).toContain(`${events}: ${blank}`);
      expect(alert).not.toMatch(/\b0 /);
      expect(await p.locator('#err-events').textContent()).toBe(blank);
      expect(await p.locator('input[name=url]').inputValue()).toBe('https://example.com/other');
      expect(await p.locator('input[name=description]').inputValue()).toBe(XSS);
      expect(await p.locator('input[name=secret]').inputValue()).toBe('');
      await noXss(p);
      await p.screenshot({ path: join(ARTIFACTS, `field-errors-webhook-${locale}.png`), fullPage: true });
      // an amount that is no amount: the amount field's error, the rest kept
      await p.goto(`${s.url}/portal/tef`);
      await p.locator('input[name=amount]').fill('0');
      await p.locator('input[name=pix_key]').fill('someone@example.com');
      await p.locator('input[name=description]').fill('Aluguel');
      await p.locator('form[action="/portal/tef"] button[type=submit]').click();
      expect(await p.locator('input[name=amount]').getAttribute('aria-invalid')).toBe('true');
      expect(await p.locator('#err-amount').count()).toBe(1);
      expect(await p.locator('input[name=description]').inputValue()).toBe('Aluguel');
      expect(await p.locator('input[name=pix_key]').inputValue()).toBe('someone@example.com');
      await p.screenshot({ path: join(ARTIFACTS, `field-errors-tef-${locale}.png`), fullPage: true });
      // a fresh page is an empty form again
      await p.goto(`${s.url}/portal/tef`);
      expect(await p.locator('input[name=description]').inputValue()).toBe('');
      await p.context().close();
    }
  });

  it('the statement filter offers the statuses as the rows show them', async () => {
    const p = await newPage('pt-BR', 1280);
    await signIn(p);
    await p.goto(`${s.url}/portal/statement`);
    const options = await p.locator('#f-status option').evaluateAll((os) => os.map((o) => [(o as unknown as { value: string }).value, o.textContent]));
    expect(options).toEqual([['', 'todos'], ['settled', 'Concluída'], ['processing', 'Pendente'], ['rejected', 'Rejeitada'], ['failed', 'Falhou']]);
    await p.selectOption('#f-status', 'settled');
    await p.locator('form[action="/portal/statement"] button[type=submit]').click();
    const shown = await p.locator('table.statement tbody td.hide-sm .badge').allTextContents();
    expect(shown.length).toBeGreaterThan(0);
    expect(new Set(shown)).toEqual(new Set(['Concluída']));
    await p.context().close();
  });

  it("shows each attempt's request and answer, and redelivers every failed delivery since a moment, once", async () => {
    const p = await newPage('en-US', 1280);
    await signIn(p);
    await p.goto(`${s.url}/portal/webhooks/${webhookId}`);
    const attempt = p.getByTestId('attempt').first();
    await attempt.locator('summary').click();
    const request = (await attempt.getByTestId('attempt-request').textContent())!;
    expect(request).toContain(`POST ${receiver.url}/hooks`);
    expect(request).toMatch(/x-service-event: pix\.payout\.(confirmed|processing)/);
    expect(request).toContain(payoutId);
    expect(await attempt.getByTestId('attempt-answer').textContent()).toContain('HTTP 500');
    expect(await attempt.getByTestId('attempt-answer').textContent()).toContain('receiver down <b>500</b>'); // as text
    await p.screenshot({ path: join(ARTIFACTS, 'webhook-attempt-open-en-1280.png'), fullPage: true });
    const failed = await s.ctx.db.query<{ id: string }>(`SELECT id FROM webhook_deliveries WHERE webhook_id = $1 AND status = 'failed'`, [webhookId]);
    receiver.handler = ok;
    const before = receiver.received.length;
    await p.locator(`form[action="/portal/webhooks/${webhookId}/redeliver"] button`).click();
    expect(await p.getByRole('status').first().textContent()).toBe(`${failed.length} deliveries queued again`);
    await receiver.waitFor((r) => r.length >= before + failed.length);
    const ids = new Set(receiver.received.slice(before).map((r) => r.headers['webhook-id']));
    expect(ids).toEqual(new Set(failed.map((f) => f.id))); // the same deliveries, through the queue
    await waitFor(
      async () => (await s.ctx.db.query<{ n: number }>(`SELECT count(*)::int AS n FROM webhook_deliveries WHERE webhook_id = $1 AND status = 'delivered'`, [webhookId]))[0]!.n,
      (n) => n === failed.length,
    );
    // again (a new form): nothing failed since, nothing sent twice
    await p.goto(`${s.url}/portal/webhooks/${webhookId}`);
    await p.locator(`form[action="/portal/webhooks/${webhookId}/redeliver"] button`).click();
    expect(await p.getByRole('status').first().textContent()).toBe('0 deliveries queued again');
    expect(receiver.received.length).toBe(before + failed.length);
    // more than 30 days back is a field error of "since"
    await p.locator(`form[action="/portal/webhooks/${webhookId}/redeliver"] input[name=since]`).fill('2020-01-01T00:00');
    await p.locator(`form[action="/portal/webhooks/${webhookId}/redeliver"] button`).click();
    expect(await p.locator('#err-since').textContent()).toContain('30 days');
    expect(await p.locator('input[name=since]').inputValue()).toBe('2020-01-01T00:00');
    await p.context().close();
  });

  it('the timeline shows the request with its Idempotency-Key, the postings, the rail, the events and every webhook attempt', async () => {
    const { transactionTimeline } = await import('../../src/transactions/timeline.js');
    const t = await transactionTimeline({ db: s.ctx.db }, a.accountId, payoutId);
    const kinds = t.entries.map((e) => e.kind);
    expect(t.entries[0]).toMatchObject({ kind: 'request', method: 'POST', path: '/api/external/pix/cash-out', idempotency_key: IDEM, response_status: 200 });
    expect(t.entries.filter((e) => e.kind === 'ledger').map((e) => (e as { ledger_kind: string }).ledger_kind)).toEqual(['cash_out_reserve', 'cash_out_settle']);
    for (const e of t.entries) if (e.kind === 'ledger') expect(e.postings.reduce((sum, x) => sum + x.amount, 0)).toBe(0); // balanced
    expect(t.entries.filter((e) => e.kind === 'rail').map((e) => (e as { message: string }).message)).toContain('payment.settled');
    expect(t.entries.filter((e) => e.kind === 'event').map((e) => (e as { event: string }).event)).toEqual(['pix.payout.processing', 'pix.payout.confirmed']);
    const attempts = t.entries.filter((e) => e.kind === 'webhook_attempt') as { status_code: number | null }[];
    expect(attempts.filter((x) => x.status_code === 500).length).toBeGreaterThanOrEqual(2);
    expect(attempts.some((x) => x.status_code === 200)).toBe(true); // the redelivery
    expect(kinds.indexOf('request')).toBeLessThan(kinds.indexOf('ledger'));
    // another account's transaction is not found
    await expect(transactionTimeline({ db: s.ctx.db }, a.accountId + 1, payoutId)).rejects.toThrow('Transaction not found');

    for (const [locale, key] of [['pt-BR', 'Razão contábil'], ['en-US', 'Ledger']] as const) {
      const p = await newPage(locale, 1280);
      await signIn(p);
      await p.goto(`${s.url}/portal/transactions/${payoutId}/timeline`);
      expect(await p.getByTestId('idempotency-key').first().textContent()).toBe(IDEM);
      const text = (await p.locator('table.timeline').textContent())!;
      for (const want of [key, 'cash_out_reserve', 'cash_out_settle', 'payment.settled', 'pix.payout.confirmed', 'HTTP 500', 'HTTP 200']) expect(text).toContain(want);
      await noXss(p);
      await p.screenshot({ path: join(ARTIFACTS, `timeline-after-redeliver-${locale}.png`), fullPage: true });
      await p.context().close();
    }
    // the received PIX under MED: its case is on its timeline
    const inTl = await transactionTimeline({ db: s.ctx.db }, a.accountId, inboundId);
    expect(inTl.entries.some((e) => e.kind === 'med' && e.step === 'opened')).toBe(true);
    expect(inTl.entries.some((e) => e.kind === 'ledger' && e.ledger_kind === 'med_block')).toBe(true);
  });
});
