import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CircuitOpenError, Pixgate, standardWebhooksKey, verifyWebhook, WebhookVerificationError } from '@pixgate/sdk';
import { standardWebhooksKey as serverKey, webhookSecretProblem } from '../../src/webhooks/standardWebhooks.js';
import { merchantWithKey, type MerchantFixture } from '../helpers/client.js';
import { BACKENDS } from '../helpers/db.js';
import { startFaultProxy, type FaultProxy } from '../helpers/faultProxy.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { startReceiver, type Receiver } from '../webhooks/helpers.js';

const BASE64 = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/';

/**
 * `whsec_` secrets as a merchant might type them: the base64 of some bytes, often with the last
 * data character changed (stray bits: non-canonical), padding dropped or doubled.
 */
const whsecSecrets = fc
  .tuple(fc.uint8Array({ minLength: 8, maxLength: 40 }), fc.integer({ min: 0, max: 63 }), fc.constantFrom('keep', 'tweak', 'unpad', 'extra-pad'))
  .map(([bytes, c, how]) => {
    let b64 = Buffer.from(bytes).toString('base64');
    const data = b64.replace(/=+$/, '');
    const pad = b64.slice(data.length);
    if (how === 'tweak') b64 = data.slice(0, -1) + BASE64[c]! + pad;
    if (how === 'unpad') b64 = data;
    if (how === 'extra-pad') b64 = `${b64}=`;
    return `whsec_${b64}`;
  });

describe('one key per webhook secret (issue 24, item 13)', () => {
  it('the SDK and the server derive the same Standard Webhooks key from any whsec_ secret', () => {
    fc.assert(
      fc.property(whsecSecrets, (secret) => {
        expect(Buffer.from(standardWebhooksKey(secret))).toEqual(serverKey(secret).key);
      }),
      { numRuns: 2_000 },
    );
    const stray = 'whsec_AAAAAAAAAAAAAAAAAAAAAB==';
    expect(Buffer.from(standardWebhooksKey(stray))).toEqual(serverKey(stray).key);
  });

  it('registration accepts a whsec_ secret exactly when it is canonical base64 of at least 16 bytes', () => {
    fc.assert(
      fc.property(whsecSecrets, (secret) => {
        const rest = secret.slice(6);
        const bytes = Buffer.from(rest, 'base64');
        const canonical = /^[A-Za-z0-9+/=]+$/.test(rest) && rest.length % 4 === 0 && bytes.length >= 16 && bytes.toString('base64') === rest;
        expect(webhookSecretProblem(secret) === undefined).toBe(canonical);
        // What registration accepts has one key, and it is the decoded bytes.
        if (canonical) expect(serverKey(secret)).toEqual({ key: bytes, format: 'base64' });
      }),
      { numRuns: 2_000 },
    );
  });
});

describe.each(BACKENDS)('webhook secrets, verifyWebhook defaults and the SDK breaker against a real server (%s)', (backend) => {
  let s: TestServer;
  let m: MerchantFixture;
  let r: Receiver;
  let proxy: FaultProxy;
  beforeAll(async () => {
    r = await startReceiver();
    s = await startTestServer({ backend, env: { WEBHOOK_ALLOWED_HOSTS: r.hostPort } });
    m = await merchantWithKey(s);
    proxy = await startFaultProxy(s.url);
  });
  afterAll(async () => {
    await proxy?.close();
    await s?.close();
    await r?.close();
  });

  const register = (secret: string) => m.client.post('/webhooks', { url: `${r.url}/hook`, events: ['pix.charge.paid'], allow_insecure: true, secret });

  it('POST /webhooks refuses a non-canonical whsec_ secret with a clear 400 and writes nothing', async () => {
    const before = (await m.client.get('/webhooks')).body.length;
    const res = await register('whsec_AAAAAAAAAAAAAAAAAAAAAB==');
    expect(res.status).toBe(400);
    expect(res.body).toEqual({ errors: { bad_request: { secret: [expect.stringContaining('canonical')] } } });
    expect((await m.client.get('/webhooks')).body.length).toBe(before);
    expect((await register('whsec_AAAAAAAAAAAAAAAAAAAAAA==')).status).toBe(201);
    expect((await register('my-own-secret-of-some-length')).status).toBe(201);
  });

  it('verifyWebhook refuses by default a 10-day-old delivery whose webhook-* headers were stripped; legacy mode must be chosen', async () => {
    const hook = await m.client.post('/webhooks', { url: `${r.url}/replay`, events: ['pix.charge.paid'], allow_insecure: true });
    expect(hook.status).toBe(201);
    expect((await s.admin('POST', `/webhooks/${hook.body.id}/test`)).status).toBe(202);
    await r.waitFor((x) => x.some((y) => y.path === '/replay'));
    const d = r.received.find((y) => y.path === '/replay')!;
    const secret = hook.body.secret as string;
    // The delivery as sent verifies, with its signed id.
    expect(await verifyWebhook({ rawBody: d.raw, headers: d.headers, secret })).toMatchObject({ scheme: 'standard-webhooks', id: d.headers['webhook-id'] });

    // Ten days later, replayed without its webhook-* headers and with a fresh X-Service-Delivery.
    const replay: Record<string, string | string[] | undefined> = { ...d.headers, 'x-service-delivery': 'fresh-id-to-defeat-dedup' };
    delete replay['webhook-id'];
    delete replay['webhook-timestamp'];
    delete replay['webhook-signature'];
    const tenDaysLater = Date.now() + 10 * 86_400_000;
    await expect(verifyWebhook({ rawBody: d.raw, headers: replay, secret, now: tenDaysLater })).rejects.toBeInstanceOf(WebhookVerificationError);
    await expect(verifyWebhook({ rawBody: d.raw, headers: replay, secret, now: tenDaysLater })).rejects.toThrow(/requireTimestamp: false/);
    // Legacy receivers opt in explicitly, and are told the id is not signed.
    expect(await verifyWebhook({ rawBody: d.raw, headers: replay, secret, requireTimestamp: false })).toMatchObject({ scheme: 'x-service-signature', timestamp: null });
  });

  describe('the SDK circuit breaker', () => {
    const client = (now: () => number) =>
      new Pixgate({ baseUrl: proxy.url, clientId: m.client.clientId, clientSecret: m.client.clientSecret, sleep: async () => {}, maxRetries: 0, now, timeoutMs: 2_000 });

    it('an answer below 500 (here a 400) ends a run of failures: 503, 503, 400, 503 leaves the circuit closed', async () => {
      const c = client(() => 1_000_000);
      proxy.plan = ['503', '503', 'forward', '503'];
      expect(await c.balance().catch((e) => e.status)).toBe(503);
      expect(await c.balance().catch((e) => e.status)).toBe(503);
      expect(await c.events.list({ limit: 0 }).catch((e) => e.status)).toBe(400); // the server's own 400
      expect(await c.balance().catch((e) => e.status)).toBe(503);
      expect(c.breaker!.state).toBe('closed');
      expect((await c.balance()).available).toBeDefined();
    });

    it('a probe the caller cancels neither closes the circuit nor counts: the next call is the probe', async () => {
      let now = 2_000_000;
      const c = client(() => now);
      proxy.plan = ['503', '503', '503'];
      for (let i = 0; i < 3; i++) expect(await c.balance().catch((e) => e.status)).toBe(503);
      expect(c.breaker!.state).toBe('open');
      now += 30_000;
      proxy.plan = ['hang'];
      const seen = proxy.seen.length;
      const ctl = new AbortController();
      const probe = c.request('GET', '/balance', { signal: ctl.signal, retry: false }).catch((e) => e);
      while (proxy.seen.length === seen) await new Promise((resolve) => setTimeout(resolve, 10));
      ctl.abort();
      expect((await probe).name).toBe('AbortError');
      expect(c.breaker!.state).toBe('half-open');
      // The next call is the probe: its failure opens the circuit again at once.
      proxy.plan = ['503'];
      expect(await c.balance().catch((e) => e.status)).toBe(503);
      expect(c.breaker!.state).toBe('open');
      expect(await c.balance().catch((e) => e)).toBeInstanceOf(CircuitOpenError);
    });
  });
});
