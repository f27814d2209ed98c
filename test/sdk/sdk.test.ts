import { createHmac } from 'node:crypto';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { signV1, signV2 } from '../../src/auth/hmac.js';
import { canonicalize } from '../../src/lib/canonicalJson.js';
import {
  BusinessError,
  CircuitOpenError,
  hmacHex,
  PermissionError,
  PipelineError,
  Pixgate,
  RateLimitError,
  SDK_ROUTES,
  SignatureError,
  signRequest,
  standardWebhooksKey,
  TimeoutError,
  verifyWebhook,
  WebhookVerificationError,
} from '@pixgate/sdk';
import { standardWebhooksKey as serverKey } from '../../src/webhooks/standardWebhooks.js';
import { BACKENDS } from '../helpers/db.js';
import { addPixKey, merchantWithKey, type MerchantFixture } from '../helpers/client.js';
import { startFaultProxy, type FaultProxy } from '../helpers/faultProxy.js';
import { foreignKey, SIM_FAST, waitFor } from '../helpers/pix.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { startReceiver, type Receiver } from '../webhooks/helpers.js';

const sdkFor = (s: { url: string }, m: MerchantFixture, extra: Partial<Omit<ConstructorParameters<typeof Pixgate>[0], 'keyCase'>> = {}) =>
  new Pixgate({ baseUrl: s.url, clientId: m.client.clientId, clientSecret: m.client.clientSecret, sleep: async () => {}, ...extra });

describe('SDK signing (WebCrypto) agrees with the server’s verifier', () => {
  it('v1 and v2 signatures equal the server’s for arbitrary JSON bodies', async () => {
    await fc.assert(
      fc.asyncProperty(fc.jsonValue(), fc.string({ minLength: 1 }), async (value, secret) => {
        const body = JSON.stringify(value);
        const v1 = await signRequest({ version: 'v1', clientSecret: secret, method: 'POST', path: '/api/external/x', body });
        expect(v1.headers.hmac).toBe(signV1(secret, canonicalize(body)));
        const v2 = await signRequest({ version: 'v2', clientSecret: secret, method: 'post', path: '/api/external/x?y=1', body, idempotencyKey: 'idem-12345678', nonce: 'n'.repeat(16), timestamp: 1_700_000_000 });
        expect(v2.headers.hmac).toBe(
          signV2(secret, { timestamp: '1700000000', nonce: 'n'.repeat(16), method: 'POST', path: '/api/external/x', idempotencyKey: 'idem-12345678', canonicalBody: canonicalize(body) }),
        );
      }),
      { numRuns: 100 },
    );
  });

  it('HMAC-SHA256 and the Standard Webhooks key match node:crypto and the server', async () => {
    await fc.assert(
      fc.asyncProperty(fc.string({ minLength: 1 }), fc.string(), async (key, msg) => {
        expect(await hmacHex('SHA-256', key, msg)).toBe(createHmac('sha256', key).update(msg).digest('hex'));
        expect(Buffer.from(standardWebhooksKey(key))).toEqual(serverKey(key).key);
      }),
    );
    const generated = `whsec_${Buffer.alloc(32, 9).toString('base64')}`;
    expect(Buffer.from(standardWebhooksKey(generated))).toEqual(serverKey(generated).key);
  });
});

describe.each(BACKENDS)('SDK against a real server (%s)', (backend) => {
  let s: TestServer;
  let m: MerchantFixture;
  let sdk: Pixgate;
  let r: Receiver;
  beforeAll(async () => {
    r = await startReceiver();
    s = await startTestServer({ backend, env: { ...SIM_FAST, WEBHOOK_ALLOWED_HOSTS: r.hostPort } });
    m = await merchantWithKey(s, { depositCents: 1_000_000 });
    await addPixKey(s, m.accountId, 'evp');
    sdk = sdkFor(s, m);
  });
  afterAll(async () => {
    await s?.close();
    await r?.close();
  });

  it('every SDK route is a route of the server, and every merchant operation of the OpenAPI document is an SDK route', async () => {
    for (const [method, path] of SDK_ROUTES) expect(s.app.hasRoute({ method, url: `/api/external${path}` }), `${method} ${path}`).toBe(true);
    const doc = await fetch(`${s.url}/openapi.json`);
    expect(doc.status).toBe(200);
    const paths = ((await doc.json()) as { paths: Record<string, Record<string, unknown>> }).paths;
    const sdk = new Set(SDK_ROUTES.map(([method, path]) => `${method} /api/external${path.replace(/:(\w+)/g, '{$1}')}`));
    const documented = Object.entries(paths)
      .filter(([p]) => p.startsWith('/api/external/'))
      .flatMap(([p, ops]) => Object.keys(ops).filter((m) => ['get', 'post', 'put', 'patch', 'delete'].includes(m)).map((m) => `${m.toUpperCase()} ${p}`));
    expect(documented.length).toBeGreaterThan(0);
    for (const op of documented) expect(sdk.has(op), `${op} (documented) has no SDK method`).toBe(true);
  });

  it('happy paths: balance, cash-out (v2 and v1), charge create and read, lookups, receipt, webhooks, CPF, keys', async () => {
    const balance = await sdk.balance();
    expect(balance.available).toBe(100_000_000);
    const key = await foreignKey(s, { behavior: 'settle' });
    const out = await sdk.pix.cashOut({ amount: 1234, pix_key: key, pix_key_type: 'email', external_id: `sdk-${m.accountId}` });
    expect(out).toMatchObject({ worked: true, amount: 123_400 });
    const v1 = await sdkFor(s, m, { signatureVersion: 'v1' }).pix.cashOut({ amount: 100, pix_key: key, pix_key_type: 'email' });
    expect(v1.worked).toBe(true);
    expect((await sdk.transactionByExternalId(`sdk-${m.accountId}`)).transaction_id).toBe(out.transaction_id);
    await waitFor(() => sdk.transaction(out.transaction_id), (t) => t.status === 'completed');
    expect((await sdk.receipt(out.transaction_id)).amount).toBe(123_400);

    const charge = await sdk.pix.createCharge({ amount: 990, description: 'SDK' });
    expect(await sdk.pix.getCharge(charge.transaction_id)).toEqual(charge);
    expect((await sdk.pix.keys()).data.length).toBeGreaterThan(0);
    expect((await sdk.validateCpf('529.982.247-25')).valid).toBe(true);

    const hook = await sdk.webhooks.create({ url: `${r.url}/sdk`, events: ['pix.charge.paid'], allow_insecure: true });
    expect((await sdk.webhooks.list()).map((w) => w.id)).toContain(hook.id);
    await sdk.webhooks.delete(hook.id);
    expect((await sdk.webhooks.catalog()).some((e) => e.event === 'pix.payout.confirmed')).toBe(true);
    expect((await sdk.med.list()).data).toEqual([]);
  });

  it('camelCase in and out', async () => {
    const camel = new Pixgate({ baseUrl: s.url, clientId: m.client.clientId, clientSecret: m.client.clientSecret, keyCase: 'camel' });
    const b = await camel.balance();
    expect(b.ledgerTotal).toBe(b.available + b.blocked + b.pending);
    const charge = await camel.pix.createCharge({ amount: 500, externalId: `camel-${m.accountId}` });
    expect(charge.externalId).toBe(`camel-${m.accountId}`);
    expect(charge.qrCodeImage).toMatch(/^data:image\/png;base64,/);
  });

  it('for await over the statement and the transactions, across pages; the events feed to its end', async () => {
    const f = await merchantWithKey(s);
    for (let i = 0; i < 5; i++) expect((await s.admin('POST', `/accounts/${f.accountId}/deposits`, { amount: 100 + i })).status).toBe(201);
    const c = sdkFor(s, f);
    const items = [];
    for await (const item of c.statementItems({ per_page: 2 })) items.push(item);
    expect(items).toHaveLength(5);
    expect(new Set(items.map((i) => i.id)).size).toBe(5);
    const txs = [];
    for await (const t of c.transactionItems({ per_page: 3 })) txs.push(t.transaction_id);
    expect(txs.sort()).toEqual(items.map((i) => i.transaction_id).sort());

    const charge = await c.pix.createCharge({ amount: 100 }).catch((e) => e);
    expect(charge).toBeInstanceOf(BusinessError); // no PIX key: unprocessable_entity
    await addPixKey(s, f.accountId, 'evp');
    for (let i = 0; i < 3; i++) await c.pix.createCharge({ amount: 100 + i });
    const all = async () => {
      const events = [];
      for await (const e of c.events.all({ limit: 2, type: ['pix.charge.created'] })) events.push(e);
      return events;
    };
    // On a shared PostgreSQL another session's open transaction may hold the feed's horizon for up to 5 s.
    const events = await waitFor(all, (e) => e.length === 3);
    expect(events.map((e) => e.payload.amount)).toEqual([10_000, 10_100, 10_200]);
  });

  it('typed errors: pipeline, rate limit, permission, signature, business (cash-out codes, field map), each with status, code, message, request id', async () => {
    const badKey = await new Pixgate({ baseUrl: s.url, clientId: m.client.clientId, clientSecret: 'wrong' }).balance().catch((e) => e);
    expect(badKey).toBeInstanceOf(PipelineError);
    expect(badKey).toMatchObject({ status: 401, code: 'unauthorized', message: 'Invalid API key credentials' });
    expect(badKey.requestId).toMatch(/\S/);

    const elsewhere = await merchantWithKey(s, { ipWhitelist: ['10.1.2.3'] });
    expect(await sdkFor(s, elsewhere).balance().catch((e) => e)).toMatchObject({ name: 'PipelineError', status: 403, code: 'ip_not_allowed' });

    const weak = await merchantWithKey(s, { permissions: ['account:read'] });
    const denied = await sdkFor(s, weak).pix.cashOut({ amount: 1, pix_key: 'x@example.com' }).catch((e) => e);
    expect(denied).toBeInstanceOf(PermissionError);
    expect(denied).toMatchObject({ status: 403, code: 'forbidden', permission: 'transfer:write' });

    const forged = await sdk.pix.cashOut({ amount: 1, pix_key: 'x@example.com' }, { headers: { hmac: 'a'.repeat(128) } }).catch((e) => e);
    expect(forged).toBeInstanceOf(SignatureError);
    expect(forged).toMatchObject({ status: 401, code: 'invalid_signature', message: 'Invalid HMAC signature' });

    const poor = await merchantWithKey(s, { depositCents: 100 });
    const key = await foreignKey(s, { behavior: 'settle' });
    const broke = await sdkFor(s, poor).pix.cashOut({ amount: 5000, pix_key: key, pix_key_type: 'email' }).catch((e) => e);
    expect(broke).toBeInstanceOf(BusinessError);
    expect(broke).toMatchObject({ status: 400, code: 'insufficient_balance' });
    expect(broke.requestId).toMatch(/\S/);

    const invalid = await sdk.pix.cashOut({ pix_key: key, pix_key_type: 'email', amount: 'ten' as unknown as number }).catch((e) => e);
    expect(invalid).toBeInstanceOf(BusinessError);
    expect(invalid.code).toMatch(/bad_request|invalid_amount/);

    const limited = await startTestServer({ backend, env: { RATE_LIMIT_PER_MINUTE: '1' }, workers: false });
    try {
      const lm = await merchantWithKey(limited);
      const c = sdkFor(limited, lm, { maxRetryAfterMs: 1_000 });
      await c.pix.keys();
      const tooMany = await c.pix.keys().catch((e) => e);
      expect(tooMany).toBeInstanceOf(RateLimitError);
      expect(tooMany).toMatchObject({ status: 429, code: 'rate_limited', retryAfterSeconds: 60 });
    } finally {
      await limited.close();
    }
  });

  describe('retries, idempotent replay and the circuit breaker (through a failing proxy)', () => {
    let proxy: FaultProxy;
    beforeAll(async () => {
      proxy = await startFaultProxy(s.url);
    });
    afterAll(async () => proxy?.close());

    const count = async (accountId: number) =>
      (await s.ctx.db.query<{ n: number }>("SELECT count(*)::bigint AS n FROM transactions WHERE account_id = $1 AND kind <> 'deposit'", [accountId]))[0]!.n;

    it('a POST that meets 503 twice succeeds on the third attempt with the same Idempotency-Key and fresh nonces', async () => {
      const f = await merchantWithKey(s, { depositCents: 10_000 });
      const key = await foreignKey(s, { behavior: 'settle' });
      const waits: number[] = [];
      const c = sdkFor(proxy, f, { sleep: async (ms) => void waits.push(ms), random: () => 0.5 });
      proxy.seen.length = 0;
      proxy.plan = ['503', '503'];
      const out = await c.request('POST', '/pix/cash-out', { body: { amount: 100, pix_key: key, pix_key_type: 'email' } });
      expect(out).toMatchObject({ status: 200, attempts: 3 });
      const keys = new Set(proxy.seen.map((x) => x.headers['idempotency-key']));
      expect(keys.size).toBe(1);
      expect(new Set(proxy.seen.map((x) => x.headers['x-request-nonce'])).size).toBe(3);
      expect(waits).toEqual([125, 250]); // full jitter at 0.5 of 250 ms × 2^(n-1)
      expect(await count(f.accountId)).toBe(1);
    });

    it('a lost answer is retried and replayed by the server: one cash-out, the same answer', async () => {
      const f = await merchantWithKey(s, { depositCents: 10_000 });
      const key = await foreignKey(s, { behavior: 'settle' });
      const c = sdkFor(proxy, f);
      proxy.plan = ['lost'];
      const out = await c.request<{ transaction_id: string }>('POST', '/pix/cash-out', { body: { amount: 100, pix_key: key, pix_key_type: 'email' } });
      expect(out.attempts).toBe(2);
      expect(out.headers['x-idempotent-replay']).toBe('true');
      expect(await count(f.accountId)).toBe(1);
    });

    it('429 waits Retry-After; without an Idempotency-Key a POST is not retried; a GET is', async () => {
      const f = await merchantWithKey(s);
      const waits: number[] = [];
      const c = sdkFor(proxy, f, { sleep: async (ms) => void waits.push(ms) });
      proxy.plan = ['429:2'];
      expect((await c.request('GET', '/balance')).attempts).toBe(2);
      expect(waits).toEqual([2000]);
      proxy.plan = ['503'];
      const once = await c.validateCpf('52998224725', { idempotencyKey: null }).catch((e) => e);
      expect(once).toMatchObject({ status: 503 });
      proxy.plan = ['500'];
      expect((await c.request('GET', '/balance')).attempts).toBe(2);
    });

    it('a timeout is a TimeoutError and is retried', async () => {
      const f = await merchantWithKey(s);
      const c = sdkFor(proxy, f, { timeoutMs: 150, maxRetries: 1, breaker: false });
      proxy.plan = ['hang', 'hang'];
      expect(await c.balance().catch((e) => e)).toBeInstanceOf(TimeoutError);
      proxy.plan = ['hang'];
      expect((await c.request('GET', '/balance')).attempts).toBe(2);
    });

    it('three consecutive 5xx open the circuit for 30 s; then one probe closes it', async () => {
      const f = await merchantWithKey(s);
      let now = 1_000_000;
      const c = sdkFor(proxy, f, { maxRetries: 0, now: () => now, timeoutMs: 300 });
      proxy.plan = ['503', '503', '503'];
      for (let i = 0; i < 3; i++) expect(await c.balance().catch((e) => e.status)).toBe(503);
      const hits = proxy.seen.length;
      const open = await c.balance().catch((e) => e);
      expect(open).toBeInstanceOf(CircuitOpenError);
      expect(proxy.seen.length).toBe(hits); // not even sent
      now += 29_999;
      expect(await c.balance().catch((e) => e)).toBeInstanceOf(CircuitOpenError);
      now += 1;
      proxy.plan = ['hang'];
      const probe = c.request('GET', '/balance', { retry: false }).catch((e) => e);
      await waitFor(async () => proxy.seen.length, (n) => n === hits + 1);
      expect(await c.balance().catch((e) => e)).toBeInstanceOf(CircuitOpenError); // one probe at a time
      expect(await probe).toBeInstanceOf(TimeoutError);
      expect(c.breaker!.state).toBe('open');
      now += 30_000;
      expect((await c.balance()).worked).toBe(true);
      expect(c.breaker!.state).toBe('closed');
    });
  });

  it('verifies real deliveries: Standard Webhooks and X-Service-Signature, tampering and stale timestamps refused', async () => {
    const hook = await sdk.webhooks.create({ url: `${r.url}/verify`, events: ['pix.charge.paid'], allow_insecure: true });
    expect((await s.admin('POST', `/webhooks/${hook.id}/test`)).status).toBe(202);
    await r.waitFor((x) => x.some((y) => y.path === '/verify'));
    const d = r.received.find((y) => y.path === '/verify')!;
    const ok = await verifyWebhook({ rawBody: d.raw, headers: d.headers, secret: hook.secret });
    expect(ok).toMatchObject({ scheme: 'standard-webhooks', id: d.headers['x-service-delivery'], event: { event: 'webhook.test' } });
    const legacy = { ...d.headers };
    delete legacy['webhook-id'];
    delete legacy['webhook-timestamp'];
    delete legacy['webhook-signature'];
    // X-Service-Signature alone only in legacy mode, chosen explicitly (no replay protection).
    expect((await verifyWebhook({ rawBody: d.raw.toString('utf8'), headers: legacy, secret: hook.secret, requireTimestamp: false })).scheme).toBe('x-service-signature');
    const refused = [
      () => verifyWebhook({ rawBody: Buffer.concat([d.raw, Buffer.from(' ')]), headers: d.headers, secret: hook.secret }),
      () => verifyWebhook({ rawBody: d.raw, headers: d.headers, secret: 'whsec_other' }),
      () => verifyWebhook({ rawBody: d.raw, headers: d.headers, secret: hook.secret, now: Date.now() + 301_000 }),
      () => verifyWebhook({ rawBody: d.raw, headers: legacy, secret: hook.secret }),
      () => verifyWebhook({ rawBody: d.raw, headers: legacy, secret: hook.secret, requireTimestamp: true }),
      () => verifyWebhook({ rawBody: d.raw, headers: { ...legacy, 'x-service-signature': '00'.repeat(32) }, secret: hook.secret, requireTimestamp: false }),
    ];
    for (const attempt of refused) await expect(attempt()).rejects.toBeInstanceOf(WebhookVerificationError);
  });
});
