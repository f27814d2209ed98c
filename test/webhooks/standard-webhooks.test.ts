import { execFileSync, spawnSync } from 'node:child_process';
import { createHmac } from 'node:crypto';
import { Webhook } from 'standardwebhooks';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { standardWebhooksKey } from '../../src/webhooks/standardWebhooks.js';
import { BACKENDS } from '../helpers/db.js';
import { merchantWithKey } from '../helpers/client.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { startReceiver, type Receiver, type Received } from './helpers.js';

const headersOf = (r: Received) => Object.fromEntries(Object.entries(r.headers).map(([k, v]) => [k, String(v)]));

/** The Python verifier is used when the machine has it (`pip install standardwebhooks`); PyPI may be out of reach. */
const pythonVerifier = spawnSync('python3', ['-c', 'import standardwebhooks'], { stdio: 'ignore' }).status === 0;

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

  it.skipIf(!pythonVerifier)('the Python verifier (standardwebhooks on PyPI) accepts both secret forms', async () => {
    for (const [path, chosen] of [['/py-generated', undefined], ['/py-chosen', 'another-chosen-secret-456']] as const) {
      const { received, secret } = await deliveryTo(path, chosen);
      const out = execFileSync('python3', ['scripts/verify-standard-webhooks.py'], {
        input: JSON.stringify({ secret, body: received.raw.toString('utf8'), headers: headersOf(received) }),
      });
      expect(JSON.parse(out.toString()).event).toBe('webhook.test');
    }
  });
});
