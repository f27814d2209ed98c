import { spawnSync } from 'node:child_process';
import { createHmac } from 'node:crypto';
import { Webhook } from 'standardwebhooks';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { standardWebhooksKey } from '../../src/webhooks/standardWebhooks.js';
import { BACKENDS } from '../helpers/db.js';
import { merchantWithKey } from '../helpers/client.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { startReceiver, type Receiver, type Received } from './helpers.js';

const headersOf = (r: Received) => Object.fromEntries(Object.entries(r.headers).map(([k, v]) => [k, String(v)]));

/**
 * scripts/verify-standard-webhooks.py: a verifier written from the Standard Webhooks specification
 * with Python's standard library only (the published `standardwebhooks` package is on PyPI, which this
 * machine cannot reach). Needs python3; the test says so and skips without it.
 */
const python3 = spawnSync('python3', ['--version'], { stdio: 'ignore' }).status === 0;
if (!python3) console.warn('standard-webhooks.test.ts: python3 is not installed; the Python verifier test is skipped');

function pythonVerify(input: { secret: string; body: string; headers: Record<string, string>; now?: number }): { ok: boolean; payload?: { event: string }; error: string } {
  const r = spawnSync('python3', ['scripts/verify-standard-webhooks.py'], { input: JSON.stringify(input) });
  return r.status === 0 ? { ok: true, payload: JSON.parse(r.stdout.toString()), error: '' } : { ok: false, error: r.stderr.toString() };
}

describe('Standard Webhooks key derivation', () => {
  it('whsec_ + canonical standard base64 is keyed with the decoded bytes; anything else with its UTF-8 bytes', () => {
    const bytes = Buffer.alloc(32, 7);
    expect(standardWebhooksKey(`whsec_${bytes.toString('base64')}`)).toEqual({ key: bytes, format: 'base64' });
    for (const raw of [`whsec_${bytes.toString('base64url')}`, 'my-own-secret-of-16+chars', 'whsec_not base64 at all!!', 'whsec_AAAA']) {
      expect(standardWebhooksKey(raw)).toEqual({ key: Buffer.from(raw, 'utf8'), format: 'raw' });
    }
  });
});

describe.each(BACKENDS)('Standard Webhooks headers on every delivery (%s)', (backend) => {
  let s: TestServer;
  let r: Receiver;
  beforeAll(async () => {
    r = await startReceiver();
    s = await startTestServer({ backend, env: { WEBHOOK_ALLOWED_HOSTS: r.hostPort } });
  });
  afterAll(async () => {
    await s?.close();
    await r?.close();
  });

  async function deliveryTo(path: string, secret?: string): Promise<{ received: Received; secret: string }> {
    const m = await merchantWithKey(s);
    const hook = await m.client.post('/webhooks', { url: `${r.url}${path}`, events: ['pix.charge.paid'], allow_insecure: true, ...(secret ? { secret } : {}) });
    expect(hook.status).toBe(201);
    expect((await s.admin('POST', `/webhooks/${hook.body.id}/test`)).status).toBe(202);
    await r.waitFor((x) => x.some((y) => y.path === path));
    return { received: r.received.find((y) => y.path === path)!, secret: hook.body.secret };
  }

  it('a generated secret verifies with the npm verifier as given, beside X-Service-Signature', async () => {
    const { received, secret } = await deliveryTo('/generated');
    expect(secret).toMatch(/^whsec_[A-Za-z0-9+/]{43}=$/);
    const h = headersOf(received);
    expect(h['webhook-id']).toBe(h['x-service-delivery']);
    expect(Math.abs(Number(h['webhook-timestamp']) - Date.now() / 1000)).toBeLessThan(60);
    expect(h['webhook-signature']).toMatch(/^v1,[A-Za-z0-9+/]{43}=$/);
    expect(h['x-service-signature']).toBe(createHmac('sha256', secret).update(received.raw).digest('hex'));
    const payload = new Webhook(secret).verify(received.raw.toString('utf8'), h) as { event: string };
    expect(payload.event).toBe('webhook.test');
    // A changed body, id or timestamp is refused by the same verifier.
    expect(() => new Webhook(secret).verify(received.raw.toString('utf8') + ' ', h)).toThrow();
    expect(() => new Webhook(secret).verify(received.raw.toString('utf8'), { ...h, 'webhook-id': 'other' })).toThrow();
    expect(() => new Webhook(secret).verify(received.raw.toString('utf8'), { ...h, 'webhook-timestamp': String(Number(h['webhook-timestamp']) - 1) })).toThrow();
  });

  it('a secret the merchant chose verifies with the npm verifier in raw format', async () => {
    const { received, secret } = await deliveryTo('/chosen', 'my-own-webhook-secret-123');
    const h = headersOf(received);
    expect(() => new Webhook(secret).verify(received.raw.toString('utf8'), h)).toThrow();
    expect((new Webhook(secret, { format: 'raw' }).verify(received.raw.toString('utf8'), h) as { event: string }).event).toBe('webhook.test');
  });

  it.skipIf(!python3)('the Python verifier (scripts/verify-standard-webhooks.py) accepts real deliveries and refuses tampered ones', async () => {
    for (const [path, chosen] of [['/py-generated', undefined], ['/py-chosen', 'another-chosen-secret-456']] as const) {
      const { received, secret } = await deliveryTo(path, chosen);
      const body = received.raw.toString('utf8');
      const headers = headersOf(received);
      const ok = pythonVerify({ secret, body, headers });
      expect(ok.error).toBe('');
      expect(ok.payload!.event).toBe('webhook.test');
      // A changed body, id, timestamp, secret or signature is refused.
      expect(pythonVerify({ secret, body: body.replace('webhook.test', 'webhook.tesT'), headers }).error).toContain('no matching v1 signature');
      expect(pythonVerify({ secret, body: body + ' ', headers }).ok).toBe(false);
      expect(pythonVerify({ secret, body, headers: { ...headers, 'webhook-id': `${headers['webhook-id']}x` } }).ok).toBe(false);
      expect(pythonVerify({ secret: `${secret}x`, body, headers }).ok).toBe(false);
      expect(pythonVerify({ secret, body, headers: { ...headers, 'webhook-signature': 'v1,AAAA' } }).ok).toBe(false);
      // Outside the 5-minute tolerance either way.
      const ts = Number(headers['webhook-timestamp']);
      expect(pythonVerify({ secret, body, headers, now: ts + 301 }).error).toContain('tolerance');
      expect(pythonVerify({ secret, body, headers, now: ts - 301 }).error).toContain('tolerance');
      expect(pythonVerify({ secret, body, headers, now: ts + 300 }).ok).toBe(true);
      // Several signatures (key rotation): one matching v1 is enough; other versions are ignored.
      const sig = headers['webhook-signature']!.slice(3);
      expect(pythonVerify({ secret, body, headers: { ...headers, 'webhook-signature': `v1,AAAA v2,${sig} v1,${sig}` } }).ok).toBe(true);
      expect(pythonVerify({ secret, body, headers: { ...headers, 'webhook-signature': `v2,${sig}` } }).ok).toBe(false);
    }
  });
});
