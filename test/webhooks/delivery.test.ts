import { createHmac } from 'node:crypto';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { insertAccount } from '../../src/merchants/repository.js';
import { openBooks } from '../../src/ledger/ledger.js';
import { webhookWorkers } from '../../src/webhooks/workers.js';
import { emitEvent } from '../../src/events/outbox.js';
import { dispatchOutbox } from '../../src/webhooks/repository.js';
import { EVENT_ALIASES } from '../../src/webhooks/registration.js';
import { BACKENDS } from '../helpers/db.js';
import { merchantWithKey, type MerchantFixture } from '../helpers/client.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { emit, insertTestWebhook, ok, startReceiver, waitUntil, type Receiver } from './helpers.js';

/** Per-attempt deadline of these tests: short for the hang test, long enough for a loaded machine. */
const TIMEOUT_MS = 1500;
const UUID_V4 = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

describe.each(BACKENDS)('webhook deliveries on %s', (backend) => {
  let s: TestServer;
  const receivers: Receiver[] = [];
  beforeAll(async () => {
    s = await startTestServer({
      backend,
      // Every port of 127.0.0.1 is allowed, so each test's receiver can be registered; the retry
      // schedule is short so that retries happen within the test.
      env: { WEBHOOK_ALLOWED_HOSTS: '127.0.0.1', WEBHOOK_RETRY_SCHEDULE: '100ms,100ms,100ms,100ms', WEBHOOK_TIMEOUT_MS: String(TIMEOUT_MS) },
    });
  });
  afterEach(async () => {
    for (const r of receivers.splice(0)) await r.close();
  });
  afterAll(async () => s?.close());

  async function receiver(handler = ok) {
    const r = await startReceiver(handler);
    receivers.push(r);
    return r;
  }

  async function subscribe(fx: MerchantFixture, url: string, events = ['pix.charge.paid'], extra: Record<string, unknown> = {}) {
    const res = await fx.client.post('/webhooks', { url, events, allow_insecure: true, ...extra });
    expect(res.status).toBe(201);
    return res.body as { id: string; secret: string };
  }

  const deliveries = (webhookId: string) =>
    s.ctx.db.query<any>('SELECT * FROM webhook_deliveries WHERE webhook_id = $1 ORDER BY outbox_id', [webhookId]);
  const attempts = (deliveryId: string) =>
    s.ctx.db.query<any>('SELECT * FROM webhook_attempts WHERE delivery_id = $1 ORDER BY attempt', [deliveryId]);
  async function settled(webhookId: string, n: number) {
    await waitUntil(async () => (await deliveries(webhookId)).filter((d) => d.status !== 'pending').length >= n, 15_000, `${n} settled deliveries`);
    return deliveries(webhookId);
  }

  it('POSTs the event signed with HMAC-SHA256 over the raw body, once', async () => {
    const r = await receiver();
    const fx = await merchantWithKey(s);
    const hook = await subscribe(fx, `${r.url}/pix?x=1`);
    const eventId = await emit(s.ctx.db, { merchantId: fx.merchantId, accountId: fx.accountId, subject: 'PIXIN-SIG-1' });
    const [d] = await settled(hook.id, 1);
    expect(r.received).toHaveLength(1);
    const got = r.received[0]!;
    expect(got.path).toBe('/pix?x=1');
    expect(got.headers['content-type']).toBe('application/json');
    expect(got.headers['x-service-signature']).toBe(createHmac('sha256', hook.secret).update(got.raw).digest('hex'));
    expect(got.headers['x-service-event']).toBe('pix.charge.paid');
    expect(got.headers['x-service-delivery']).toMatch(UUID_V4);
    expect(got.headers['x-service-delivery']).toBe(d.id);
    expect(got.headers['x-service-attempt']).toBe('1');
    expect(got.headers['user-agent']).toBe('pixgate-webhooks/1');
    expect(got.body).toEqual({ event: 'pix.charge.paid', status: 'paid', transaction_id: 'PIXIN-SIG-1', amount: 1_000_000, paid_at: '2026-01-02T03:04:05.000Z' });
    // The signature covers the bytes as sent: re-serializing them would not do.
    expect(got.raw.toString('utf8')).toBe(JSON.stringify(got.body));
    expect(d).toMatchObject({ status: 'delivered', attempts: 1, last_status_code: 200, event: 'pix.charge.paid', subject: 'PIXIN-SIG-1' });
    const [outbox] = await s.ctx.db.query<any>('SELECT id, EXISTS (SELECT 1 FROM outbox_pending p WHERE p.id = o.id) AS pending FROM outbox_events o WHERE event_id = $1', [eventId]);
    expect(outbox.pending).toBe(false);
    expect(d.outbox_id).toBe(outbox.id);
    expect(await attempts(d.id)).toMatchObject([{ attempt: 1, status_code: 200, error: null, response_body: '{"ok":true}' }]);
  });

  it('a receiver that fails 3 times then succeeds gets the event once successfully, with the same delivery id every time', async () => {
    let calls = 0;
    const r = await receiver((_req, res) => {
      calls++;
      if (calls <= 3) res.writeHead(calls === 2 ? 503 : 500).end('try later');
      else res.writeHead(204).end();
    });
    const fx = await merchantWithKey(s);
    const hook = await subscribe(fx, `${r.url}/flaky`);
    await emit(s.ctx.db, { merchantId: fx.merchantId, accountId: fx.accountId, subject: 'PIXIN-FLAKY-1' });
    const [d] = await settled(hook.id, 1);
    expect(d).toMatchObject({ status: 'delivered', attempts: 4, retry_step: 3, last_status_code: 204 });
    expect(r.received).toHaveLength(4);
    expect(new Set(r.received.map((x) => x.headers['x-service-delivery']))).toEqual(new Set([d.id]));
    expect(r.received.map((x) => x.headers['x-service-attempt'])).toEqual(['1', '2', '3', '4']);
    expect(new Set(r.received.map((x) => x.raw.toString()))).toHaveProperty('size', 1);
    for (const x of r.received) expect(x.headers['x-service-signature']).toBe(createHmac('sha256', hook.secret).update(x.raw).digest('hex'));
    const a = await attempts(d.id);
    expect(a.map((x) => [x.attempt, x.status_code, x.error])).toEqual([
      [1, 500, 'HTTP 500'],
      [2, 503, 'HTTP 503'],
      [3, 500, 'HTTP 500'],
      [4, 204, null],
    ]);
    expect(a[0].response_body).toBe('try later');
    // Retries wait (100 ms ± 20 % here).
    for (let i = 1; i < r.received.length; i++) expect(r.received[i]!.at - r.received[i - 1]!.at).toBeGreaterThanOrEqual(75);
  });

  it('a receiver that never answers is timed out and the event retried', async () => {
    let calls = 0;
    const r = await receiver((_req, res) => {
      if (++calls === 1) return; // hang: no answer at all
      res.writeHead(200).end();
    });
    const fx = await merchantWithKey(s);
    const hook = await subscribe(fx, `${r.url}/slow`);
    await emit(s.ctx.db, { merchantId: fx.merchantId, accountId: fx.accountId, subject: 'PIXIN-HANG-1' });
    const [d] = await settled(hook.id, 1);
    expect(d.status).toBe('delivered');
    const [first, second] = await attempts(d.id);
    expect(first).toMatchObject({ attempt: 1, status_code: null, error: `timed out after ${TIMEOUT_MS} ms` });
    expect(first.duration_ms).toBeGreaterThanOrEqual(TIMEOUT_MS - 10);
    expect(first.duration_ms).toBeLessThan(TIMEOUT_MS + 1000);
    expect(second).toMatchObject({ attempt: 2, status_code: 200 });
  });

  it('a redirect is not followed: a 3xx is a failed attempt', async () => {
    let calls = 0;
    const r = await receiver((req, res) => {
      if (req.url === '/elsewhere') return void res.writeHead(200).end();
      if (++calls === 1) return void res.writeHead(302, { location: '/elsewhere' }).end();
      res.writeHead(200).end();
    });
    const fx = await merchantWithKey(s);
    const hook = await subscribe(fx, `${r.url}/moved`);
    await emit(s.ctx.db, { merchantId: fx.merchantId, accountId: fx.accountId, subject: 'PIXIN-REDIR-1' });
    const [d] = await settled(hook.id, 1);
    expect(r.received.map((x) => x.path)).toEqual(['/moved', '/moved']);
    expect((await attempts(d.id)).map((x) => [x.status_code, x.error])).toEqual([
      [302, 'HTTP 302: redirects are not followed'],
      [200, null],
    ]);
  });

  it('after the last retry the delivery is failed, every attempt recorded', async () => {
    const r = await receiver((_req, res) => void res.writeHead(500).end());
    const fx = await merchantWithKey(s);
    const hook = await subscribe(fx, `${r.url}/down`);
    await emit(s.ctx.db, { merchantId: fx.merchantId, accountId: fx.accountId, subject: 'PIXIN-DOWN-1' });
    const [d] = await settled(hook.id, 1);
    expect(d).toMatchObject({ status: 'failed', attempts: 5, retry_step: 5, last_status_code: 500, last_error: 'HTTP 500' });
    expect(d.failed_at).not.toBeNull();
    expect(await attempts(d.id)).toHaveLength(5);
    expect(r.received).toHaveLength(5);
  });

  it('a connection error is retried like any failure', async () => {
    const r = await receiver();
    const url = r.url;
    await r.close(); // nothing listens there any more
    receivers.splice(receivers.indexOf(r), 1);
    const fx = await merchantWithKey(s);
    const hook = await subscribe(fx, `${url}/gone`);
    await emit(s.ctx.db, { merchantId: fx.merchantId, accountId: fx.accountId, subject: 'PIXIN-GONE-1' });
    const [d] = await settled(hook.id, 1);
    expect(d.status).toBe('failed');
    expect((await attempts(d.id)).every((a) => a.status_code === null && /ECONNREFUSED/.test(a.error))).toBe(true);
  });

  it('reads at most 4 KB of a response and keeps 1 KB of it', async () => {
    const r = await receiver((_req, res) => {
      res.writeHead(200, { 'content-type': 'text/plain' });
      res.end('x'.repeat(1_000_000));
    });
    const fx = await merchantWithKey(s);
    const hook = await subscribe(fx, `${r.url}/big`);
    await emit(s.ctx.db, { merchantId: fx.merchantId, accountId: fx.accountId, subject: 'PIXIN-BIG-1' });
    const [d] = await settled(hook.id, 1);
    expect(d.status).toBe('delivered');
    const [a] = await attempts(d.id);
    expect(a.response_body).toBe('x'.repeat(1024));
  });

  it('an inactive webhook gets nothing; events of its pause are not delivered after it resumes', async () => {
    const paused = await receiver();
    const active = await receiver();
    const fx = await merchantWithKey(s);
    const p = await subscribe(fx, `${paused.url}/paused`);
    const a = await subscribe(fx, `${active.url}/active`);
    expect((await s.admin('PATCH', `/webhooks/${p.id}`, { is_active: false })).body).toMatchObject({ is_active: false, status: 'inactive' });
    await emit(s.ctx.db, { merchantId: fx.merchantId, accountId: fx.accountId, subject: 'PIXIN-PAUSE-1' });
    // Both webhooks subscribe to the event: once the active one has it, the fan-out is done.
    await settled(a.id, 1);
    expect(paused.received).toEqual([]);
    expect(await deliveries(p.id)).toEqual([]);

    await s.admin('PATCH', `/webhooks/${p.id}`, { is_active: true });
    await emit(s.ctx.db, { merchantId: fx.merchantId, accountId: fx.accountId, subject: 'PIXIN-PAUSE-2' });
    await settled(p.id, 1);
    expect(paused.received.map((x) => x.body.transaction_id)).toEqual(['PIXIN-PAUSE-2']);
  });

  it('deliveries pending when a webhook is paused wait for it; a deleted webhook has its pending deliveries cancelled', async () => {
    let failing = true;
    const r = await receiver((_req, res) => void res.writeHead(failing ? 500 : 200).end());
    const fx = await merchantWithKey(s);
    const hook = await subscribe(fx, `${r.url}/p`);
    await emit(s.ctx.db, { merchantId: fx.merchantId, accountId: fx.accountId, subject: 'PIXIN-HOLD-1' });
    await r.waitFor((x) => x.length >= 1);
    await s.admin('PATCH', `/webhooks/${hook.id}`, { is_active: false });
    const seen = r.received.length;
    // Paused: no further attempt starts (one already in flight may land, and fails). Proving that
    // nothing happens takes a wait: four retry periods.
    await new Promise((resolve) => setTimeout(resolve, 400));
    expect(r.received.length).toBeLessThanOrEqual(seen + 1);
    const [d] = await deliveries(hook.id);
    expect(d.status).toBe('pending');
    failing = false;
    await s.admin('PATCH', `/webhooks/${hook.id}`, { is_active: true });
    expect((await settled(hook.id, 1))[0].status).toBe('delivered');

    failing = true;
    const other = await subscribe(fx, `${r.url}/q`);
    await emit(s.ctx.db, { merchantId: fx.merchantId, accountId: fx.accountId, subject: 'PIXIN-HOLD-2' });
    await waitUntil(async () => (await deliveries(other.id)).length === 1);
    expect((await fx.client.delete(`/webhooks/${other.id}`)).status).toBe(204);
    const [cancelled] = await deliveries(other.id);
    expect(cancelled.status).toBe('cancelled');
  });

  it('routes events by merchant, account and subscription; the alias receives pix.payout.returned', async () => {
    const fx = await merchantWithKey(s, { accountScoped: false });
    const second = await s.ctx.db.transaction(async (tx) => {
      const acc = await insertAccount(tx, fx.merchantId);
      await openBooks(tx, acc.id);
      return acc;
    });
    const stranger = await merchantWithKey(s);
    const r = await receiver();
    const hook = async (accountId: number | null, path: string, events: string[], merchantId = fx.merchantId) =>
      (await insertTestWebhook(s.ctx.db, { merchantId, accountId, url: `${r.url}/${path}`, events })).id;
    await hook(null, 'global', ['pix.charge.paid', 'pix.payout.returned']);
    await hook(fx.accountId, 'first', ['pix.charge.paid']);
    await hook(second.id, 'second', ['pix.charge.paid', 'pix.return.received']);
    await hook(fx.accountId, 'alias-and-event', ['pix.return.received', 'pix.payout.returned']);
    await hook(fx.accountId, 'other-events', ['pix.payout.confirmed']);
    await hook(stranger.accountId, 'stranger', ['pix.charge.paid', 'pix.payout.returned'], stranger.merchantId);

    await emit(s.ctx.db, { merchantId: fx.merchantId, accountId: fx.accountId, subject: 'R-1' });
    await emit(s.ctx.db, { merchantId: fx.merchantId, accountId: second.id, subject: 'R-2' });
    await emit(s.ctx.db, {
      merchantId: fx.merchantId,
      accountId: second.id,
      subject: 'R-3',
      event: 'pix.payout.returned',
      extra: { status: 'returned', direction: 'credit' },
    });
    await emit(s.ctx.db, { merchantId: fx.merchantId, accountId: fx.accountId, subject: 'R-4', event: 'pix.payout.returned', extra: { status: 'returned' } });
    await emit(s.ctx.db, { merchantId: fx.merchantId, accountId: null, subject: 'R-5' });

    const expected = [
      ['global', 'R-1'], ['global', 'R-2'], ['global', 'R-3'], ['global', 'R-4'], ['global', 'R-5'],
      ['first', 'R-1'],
      ['second', 'R-2'], ['second', 'R-3'],
      ['alias-and-event', 'R-4'],
    ];
    await r.waitFor((x) => x.length >= expected.length);
    // Nothing more arrives once the last event has been fanned out and sent.
    await waitUntil(async () => (await s.ctx.db.query<any>(`SELECT count(*)::int AS n FROM outbox_pending`))[0].n === 0);
    await waitUntil(async () => (await s.ctx.db.query<any>(`SELECT count(*)::int AS n FROM webhook_deliveries WHERE status = 'pending'`))[0].n === 0);
    const got = r.received.map((x) => [x.path.slice(1), x.body.transaction_id]).sort();
    expect(got).toEqual(expected.sort());
    const alias = r.received.filter((x) => x.path === '/second' && x.body.transaction_id === 'R-3');
    expect(alias[0]!.headers['x-service-event']).toBe('pix.payout.returned');
    expect(alias[0]!.body).toMatchObject({ event: 'pix.payout.returned', status: 'returned', direction: 'credit' });
  });

  it('one subject reaches a webhook in event order: a later event waits while an earlier one is retried', async () => {
    const order: string[] = [];
    const r = await receiver((_req, res, got) => {
      const key = `${got.body.transaction_id}#${got.body.step}`;
      // S#1 is refused until all of T has arrived: T must not wait for S.
      if (key === 'S#1' && !order.includes('T#3')) return void res.writeHead(500).end();
      order.push(key);
      res.writeHead(200).end();
    });
    const fx = await merchantWithKey(s);
    const hook = await subscribe(fx, `${r.url}/ordered`);
    for (let step = 1; step <= 3; step++) {
      await emit(s.ctx.db, { merchantId: fx.merchantId, accountId: fx.accountId, subject: 'S', extra: { transaction_id: 'S', step } });
      await emit(s.ctx.db, { merchantId: fx.merchantId, accountId: fx.accountId, subject: 'T', extra: { transaction_id: 'T', step } });
    }
    const ds = await settled(hook.id, 6);
    expect(ds.map((d) => d.status)).toEqual(Array(6).fill('delivered'));
    expect(order).toEqual(['T#1', 'T#2', 'T#3', 'S#1', 'S#2', 'S#3']);
    // No S request went out before the earlier S was delivered: S#1 was tried until it succeeded.
    const sRequests = r.received.filter((x) => x.body.transaction_id === 'S').map((x) => x.body.step);
    expect(sRequests.slice(-2)).toEqual([2, 3]);
    expect(new Set(sRequests.slice(0, -2))).toEqual(new Set([1]));
  });

  it('when an earlier event of a subject finally fails, the later ones go out', async () => {
    const r = await receiver((_req, res, got) => void res.writeHead(got.body.step === 1 ? 500 : 200).end());
    const fx = await merchantWithKey(s);
    const hook = await subscribe(fx, `${r.url}/after-failure`);
    for (let step = 1; step <= 2; step++) {
      await emit(s.ctx.db, { merchantId: fx.merchantId, accountId: fx.accountId, subject: 'U', extra: { transaction_id: 'U', step } });
    }
    const ds = await settled(hook.id, 2);
    expect(ds.map((d) => d.status)).toEqual(['failed', 'delivered']);
    expect(r.received.map((x) => x.body.step)).toEqual([1, 1, 1, 1, 1, 2]);
  });

  it('sends deliveries of different subjects to one webhook in parallel, at most 16 at a time per process', async () => {
    let open = 0;
    let most = 0;
    const r = await receiver((_req, res) => {
      most = Math.max(most, ++open);
      setTimeout(() => {
        open--;
        res.writeHead(200).end();
      }, 150);
    });
    const fx = await merchantWithKey(s);
    const hook = await subscribe(fx, `${r.url}/parallel`);
    await s.ctx.db.transaction(async (tx) => {
      for (let i = 0; i < 40; i++) {
        await emitEvent(tx, { event: 'pix.charge.paid', merchantId: fx.merchantId, accountId: fx.accountId, subject: `PAR-${i}`, payload: { status: 'paid' } });
      }
    });
    await settled(hook.id, 40);
    // Each of the 40 deliveries arrived. At least once: on a starved machine a 4 s lease (twice this
    // file's 1.5 s timeout, plus 1 s) can run out before a result is recorded, and that delivery is
    // sent again under the same X-Service-Delivery id.
    expect(new Set(r.received.map((x) => x.headers['x-service-delivery'])).size).toBe(40);
    expect(most).toBeGreaterThan(1);
    expect(most).toBeLessThanOrEqual(16);
  });

  it('refuses private destinations when sending, whatever the registration let through', async () => {
    const r = await receiver();
    const fx = await merchantWithKey(s);
    // Rows written directly: registration would refuse these URLs (the rule changed, or DNS did).
    const insert = (url: string) => insertTestWebhook(s.ctx.db, { merchantId: fx.merchantId, accountId: fx.accountId, url });
    const byName = await insert(`http://localhost:${r.port}/by-name`);
    const literal = await insert(`http://10.0.0.1:${r.port}/literal`);
    await emit(s.ctx.db, { merchantId: fx.merchantId, accountId: fx.accountId, subject: 'PIXIN-SSRF-1' });
    const [dn] = await settled(byName.id, 1);
    const [dl] = await settled(literal.id, 1);
    expect(dn.status).toBe('failed');
    expect(dl.status).toBe('failed');
    expect((await attempts(dn.id))[0].error).toBe('destination localhost is private (localhost)');
    expect((await attempts(dl.id))[0].error).toBe('destination 10.0.0.1 is private (private network)');
    expect(r.received).toEqual([]);
  });
});

describe.each(BACKENDS)('DNS rebinding on %s', (backend) => {
  it('a public name that resolves to a private address at delivery time is refused; allowed hosts are exempt', async () => {
    const r = await startReceiver();
    // Names as an attacker's DNS would answer them: public at registration, loopback at delivery.
    const dns: Record<string, string> = { 'hooks.merchant.example': '127.0.0.1', 'receiver.operator.example': '127.0.0.1' };
    const resolver = async (host: string) => {
      if (!dns[host]) throw Object.assign(new Error(`getaddrinfo ENOTFOUND ${host}`), { code: 'ENOTFOUND' });
      return [{ address: dns[host]!, family: 4 }];
    };
    const s = await startTestServer({
      backend,
      workers: false,
      env: { WEBHOOK_ALLOWED_HOSTS: `receiver.operator.example:${r.port}`, WEBHOOK_RETRY_SCHEDULE: '50ms', WEBHOOK_TIMEOUT_MS: '3000' },
    });
    const workers = webhookWorkers(s.ctx, { resolver });
    for (const w of workers) w.start();
    try {
      const fx = await merchantWithKey(s);
      const evil = await fx.client.post('/webhooks', { url: `http://hooks.merchant.example:${r.port}/x`, events: ['pix.charge.paid'], allow_insecure: true });
      const allowed = await fx.client.post('/webhooks', { url: `http://receiver.operator.example:${r.port}/ok`, events: ['pix.charge.paid'], allow_insecure: true });
      expect([evil.status, allowed.status]).toEqual([201, 201]);
      await emit(s.ctx.db, { merchantId: fx.merchantId, accountId: fx.accountId, subject: 'PIXIN-REBIND-1' });
      await r.waitFor((x) => x.length >= 1);
      await waitUntil(async () => (await s.ctx.db.query<any>(`SELECT count(*)::int AS n FROM webhook_deliveries WHERE status = 'pending'`))[0].n === 0);
      expect(r.received.map((x) => x.path)).toEqual(['/ok']);
      const [d] = await s.ctx.db.query<any>('SELECT * FROM webhook_deliveries WHERE webhook_id = $1', [evil.body.id]);
      expect(d).toMatchObject({ status: 'failed', attempts: 2, last_error: 'destination hooks.merchant.example resolves to 127.0.0.1 (loopback)' });
    } finally {
      for (const w of workers) await w.stop();
      await s.close();
      await r.close();
    }
  });
});

describe.each(BACKENDS)('subject queues on %s', (backend) => {
  it('every event waits in outbox_pending until one fan-out claims it (one statement: deliveries, followers, names)', async () => {
    const s = await startTestServer({ backend, workers: false, env: { WEBHOOK_ALLOWED_HOSTS: '127.0.0.1' } });
    try {
      const fx = await merchantWithKey(s);
      const hook = await fx.client.post('/webhooks', { url: 'http://127.0.0.1:9/q', events: ['pix.charge.paid'], allow_insecure: true });
      expect(hook.status).toBe(201);
      const pending = async () => (await s.ctx.db.query<any>('SELECT id, subject FROM outbox_pending ORDER BY id')).map((r) => r.subject);
      // Whatever writes an event — one statement with several rows here — queues each of them.
      await s.ctx.db.query(
        `INSERT INTO outbox_events (event, merchant_id, account_id, subject, payload)
         SELECT 'pix.charge.paid', $1, $2, x.subject, '{}'::jsonb FROM unnest(ARRAY['Q-1', 'Q-1', 'Q-2']) WITH ORDINALITY AS x(subject, n) ORDER BY x.n`,
        [fx.merchantId, fx.accountId],
      );
      await emit(s.ctx.db, { merchantId: fx.merchantId, accountId: fx.accountId, subject: 'Q-3', event: 'pix.charge.created' });
      expect(await pending()).toEqual(['Q-1', 'Q-1', 'Q-2', 'Q-3']);
      // Oldest first, at most `limit`; the second Q-1 follows the first (not ready).
      expect(await dispatchOutbox(s.ctx.db, 3, EVENT_ALIASES)).toEqual({ events: 3, names: ['pix.charge.paid', 'pix.charge.paid', 'pix.charge.paid'], deliveries: 3, followers: 1 });
      expect(await pending()).toEqual(['Q-3']);
      // An event no webhook subscribes to is dispatched with no delivery; then nothing is left.
      expect(await dispatchOutbox(s.ctx.db, 3, EVENT_ALIASES)).toEqual({ events: 1, names: ['pix.charge.created'], deliveries: 0, followers: 0 });
      expect(await dispatchOutbox(s.ctx.db, 3, EVENT_ALIASES)).toEqual({ events: 0, names: [], deliveries: 0, followers: 0 });
      expect(await pending()).toEqual([]);
      const ready = await s.ctx.db.query<any>('SELECT subject, ready FROM webhook_deliveries WHERE webhook_id = $1 ORDER BY outbox_id', [hook.body.id]);
      expect(ready).toEqual([
        { subject: 'Q-1', ready: true },
        { subject: 'Q-1', ready: false },
        { subject: 'Q-2', ready: true },
      ]);
    } finally {
      await s.close();
    }
  });

  it('the dispatcher repairs a queue whose head finished unnoticed (a follower left not ready)', async () => {
    const r = await startReceiver();
    const s = await startTestServer({ backend, workers: false, env: { WEBHOOK_ALLOWED_HOSTS: r.hostPort } });
    try {
      const fx = await merchantWithKey(s);
      const hook = await fx.client.post('/webhooks', { url: `${r.url}/repair`, events: ['pix.charge.paid'], allow_insecure: true });
      await emit(s.ctx.db, { merchantId: fx.merchantId, accountId: fx.accountId, subject: 'REPAIR-1' });
      await dispatchOutbox(s.ctx.db, 10, EVENT_ALIASES);
      // As after the race the repair exists for: the head is gone and its follower never promoted.
      await s.ctx.db.query('UPDATE webhook_deliveries SET ready = false WHERE webhook_id = $1', [hook.body.id]);
      const workers = webhookWorkers(s.ctx, { repairEveryMs: 50 });
      for (const w of workers) w.start();
      try {
        await r.waitFor((x) => x.length === 1);
        await waitUntil(async () => (await s.ctx.db.query<any>('SELECT status FROM webhook_deliveries WHERE webhook_id = $1', [hook.body.id]))[0].status === 'delivered');
      } finally {
        for (const w of workers) await w.stop();
      }
    } finally {
      await s.close();
      await r.close();
    }
  });
});

describe.each(BACKENDS)('stopping the workers on %s', (backend) => {
  it('an attempt cut short by shutdown is released for another worker, without counting as a failure', async () => {
    let hang = true;
    const r = await startReceiver((_req, res) => {
      if (!hang) res.writeHead(200).end();
    });
    const s = await startTestServer({ backend, workers: false, env: { WEBHOOK_ALLOWED_HOSTS: r.hostPort } });
    try {
      const fx = await merchantWithKey(s);
      const hook = await fx.client.post('/webhooks', { url: `${r.url}/stop`, events: ['pix.charge.paid'], allow_insecure: true });
      await emit(s.ctx.db, { merchantId: fx.merchantId, accountId: fx.accountId, subject: 'STOP-1' });
      const first = webhookWorkers(s.ctx, { stopGraceMs: 100 });
      for (const w of first) w.start();
      await r.waitFor((x) => x.length === 1);
      const stopping = Date.now();
      for (const w of first) await w.stop();
      expect(Date.now() - stopping).toBeLessThan(2_000);
      const [d] = await s.ctx.db.query<any>('SELECT * FROM webhook_deliveries WHERE webhook_id = $1', [hook.body.id]);
      expect(d).toMatchObject({ status: 'pending', attempts: 1, retry_step: 0, claim_token: null, last_error: 'aborted: worker stopping' });
      expect(d.next_attempt_at.getTime()).toBeLessThanOrEqual(Date.now());

      hang = false;
      const second = webhookWorkers(s.ctx);
      for (const w of second) w.start();
      try {
        await waitUntil(async () => (await s.ctx.db.query<any>('SELECT status FROM webhook_deliveries WHERE id = $1', [d.id]))[0].status === 'delivered');
      } finally {
        for (const w of second) await w.stop();
      }
      expect(r.received.map((x) => x.headers['x-service-attempt'])).toEqual(['1', '2']);
    } finally {
      await s.close();
      await r.close();
    }
  });
});
