import { createHmac } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BACKENDS } from '../helpers/db.js';
import { merchantWithKey } from '../helpers/client.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { emit, startReceiver, waitUntil, type Receiver } from './helpers.js';

const ISO_Z = /Z$/;

describe.each(BACKENDS)('operator view of webhooks on %s', (backend) => {
  let s: TestServer;
  let r: Receiver;
  let failing = true;
  beforeAll(async () => {
    r = await startReceiver((_req, res) => void res.writeHead(failing ? 500 : 200).end(failing ? 'down' : 'ok'));
    s = await startTestServer({ backend, env: { WEBHOOK_ALLOWED_HOSTS: r.hostPort, WEBHOOK_RETRY_SCHEDULE: '50ms,50ms', WEBHOOK_TIMEOUT_MS: '3000' } });
  });
  afterAll(async () => {
    await s?.close();
    await r?.close();
  });

  it('lists webhooks with delivery counts, lists deliveries with every attempt, and re-sends a failed one', async () => {
    const fx = await merchantWithKey(s);
    const created = await fx.client.post('/webhooks', { url: `${r.url}/ops`, events: ['pix.charge.paid'], allow_insecure: true, description: 'ops' });
    const id = created.body.id as string;
    for (let i = 1; i <= 3; i++) await emit(s.ctx.db, { merchantId: fx.merchantId, accountId: fx.accountId, subject: `OPS-${i}` });
    await waitUntil(async () => (await s.admin('GET', `/webhooks/${id}`)).body.deliveries.failed === 3);

    const list = await s.admin('GET', `/webhooks?merchant_id=${fx.merchantId}`);
    expect(list.status).toBe(200);
    expect(list.body.webhooks).toEqual([
      {
        id,
        merchant_id: fx.merchantId,
        account_id: fx.accountId,
        client_id: fx.client.clientId,
        url: `${r.url}/ops`,
        events: ['pix.charge.paid'],
        description: 'ops',
        is_active: true,
        allow_insecure: true,
        status: 'active',
        created_at: expect.stringMatching(ISO_Z),
        updated_at: expect.stringMatching(ISO_Z),
        deleted_at: null,
        deliveries: { pending: 0, delivered: 0, failed: 3, cancelled: 0 },
      },
    ]);
    expect(JSON.stringify(list.body)).not.toContain(created.body.secret);

    const page1 = await s.admin('GET', `/webhooks/${id}/deliveries?limit=2`);
    expect(page1.status).toBe(200);
    expect(page1.body.deliveries.map((d: any) => d.subject)).toEqual(['OPS-3', 'OPS-2']);
    const d3 = page1.body.deliveries[0];
    expect(d3).toMatchObject({
      webhook_id: id,
      event: 'pix.charge.paid',
      subject: 'OPS-3',
      status: 'failed',
      attempt_count: 3,
      next_attempt_at: null,
      last_status_code: 500,
      last_error: 'HTTP 500',
      delivered_at: null,
      failed_at: expect.stringMatching(ISO_Z),
      event_created_at: expect.stringMatching(ISO_Z),
      payload: { event: 'pix.charge.paid', status: 'paid', transaction_id: 'OPS-3', amount: 1_000_000, paid_at: '2026-01-02T03:04:05.000Z' },
    });
    expect(d3.attempts.map((a: any) => [a.attempt, a.status_code, a.error, a.response_body]), JSON.stringify(d3.attempts)).toEqual([
      [1, 500, 'HTTP 500', 'down'],
      [2, 500, 'HTTP 500', 'down'],
      [3, 500, 'HTTP 500', 'down'],
    ]);
    expect(d3.attempts[0]).toMatchObject({ started_at: expect.stringMatching(ISO_Z), duration_ms: expect.any(Number), worker: expect.any(String) });
    const page2 = await s.admin('GET', `/webhooks/${id}/deliveries?limit=2&before=${page1.body.next_before}`);
    expect(page2.body.deliveries.map((d: any) => d.subject)).toEqual(['OPS-1']);
    expect(page2.body.next_before).toBeNull();
    expect((await s.admin('GET', `/webhooks/${id}/deliveries?status=delivered`)).body.deliveries).toEqual([]);

    // Re-send: same delivery id, a fresh schedule, attempts numbered on.
    failing = false;
    const resent = await s.admin('POST', `/webhooks/${id}/deliveries/${d3.id}/resend`);
    expect(resent.status).toBe(202);
    expect(resent.body).toMatchObject({ id: d3.id, status: 'pending', next_attempt_at: expect.stringMatching(ISO_Z), failed_at: null });
    await waitUntil(async () => (await s.admin('GET', `/webhooks/${id}/deliveries/${d3.id}`)).body.status === 'delivered');
    const after = await s.admin('GET', `/webhooks/${id}/deliveries/${d3.id}`);
    expect(after.body).toMatchObject({ status: 'delivered', attempt_count: 4, last_status_code: 200, delivered_at: expect.stringMatching(ISO_Z) });
    expect(after.body.attempts.map((a: any) => a.status_code)).toEqual([500, 500, 500, 200]);
    const last = r.received.at(-1)!;
    expect(last.headers['x-service-delivery']).toBe(d3.id);
    expect(last.headers['x-service-attempt']).toBe('4');

    // A delivered one may be re-sent too (the merchant lost it); a pending one may not. (Paused, so
    // that the re-sent delivery stays pending.)
    await s.admin('PATCH', `/webhooks/${id}`, { is_active: false });
    expect((await s.admin('POST', `/webhooks/${id}/deliveries/${d3.id}/resend`)).status).toBe(202);
    const twice = await s.admin('POST', `/webhooks/${id}/deliveries/${d3.id}/resend`);
    expect([twice.status, twice.body]).toEqual([409, { errors: { conflict: 'delivery is already pending' } }]);
    await s.admin('PATCH', `/webhooks/${id}`, { is_active: true });
    await waitUntil(async () => (await s.admin('GET', `/webhooks/${id}/deliveries/${d3.id}`)).body.status === 'delivered');
    failing = true;
  });

  it('fires webhook.test at one webhook only, signed like any delivery', async () => {
    failing = false;
    const fx = await merchantWithKey(s);
    const a = await fx.client.post('/webhooks', { url: `${r.url}/test-a`, events: ['pix.charge.paid'], allow_insecure: true });
    const b = await fx.client.post('/webhooks', { url: `${r.url}/test-b`, events: ['webhook.test'], allow_insecure: true });
    const res = await s.admin('POST', `/webhooks/${a.body.id}/test`);
    expect(res.status).toBe(202);
    expect(res.body).toMatchObject({ webhook_id: a.body.id, event: 'webhook.test', status: 'pending', subject: `webhook:${a.body.id}` });
    // Taken out of the fan-out queue in the transaction that wrote it: no dispatcher ever sees it.
    const waiting = await s.ctx.db.query('SELECT p.id FROM outbox_pending p JOIN webhook_deliveries d ON d.outbox_id = p.id WHERE d.id = $1', [res.body.id]);
    expect(waiting).toEqual([]);
    await r.waitFor((x) => x.some((y) => y.path === '/test-a'));
    const got = r.received.find((y) => y.path === '/test-a')!;
    expect(got.headers['x-service-event']).toBe('webhook.test');
    expect(got.headers['x-service-delivery']).toBe(res.body.id);
    expect(got.headers['x-service-signature']).toBe(createHmac('sha256', a.body.secret).update(got.raw).digest('hex'));
    expect(got.body).toEqual({
      event: 'webhook.test',
      status: 'test',
      webhook_id: a.body.id,
      description: 'Test delivery fired from the administration',
      created_at: expect.stringMatching(ISO_Z),
    });
    await waitUntil(async () => (await s.admin('GET', `/webhooks/${a.body.id}/deliveries/${res.body.id}`)).body.status === 'delivered');
    expect(r.received.filter((y) => y.path === '/test-b')).toEqual([]);
    expect((await s.admin('GET', `/webhooks/${b.body.id}/deliveries`)).body.deliveries).toEqual([]);
    failing = true;
  });

  it('pause, resume and errors: 400 bad ids or bodies, 404 unknown, 409 deleted or paused, 401 without the token', async () => {
    const fx = await merchantWithKey(s);
    const w = await fx.client.post('/webhooks', { url: `${r.url}/errs`, events: ['pix.charge.paid'], allow_insecure: true });
    const id = w.body.id as string;
    expect((await s.admin('PATCH', `/webhooks/${id}`, { is_active: false })).body).toMatchObject({ id, is_active: false, status: 'inactive' });
    expect((await s.admin('POST', `/webhooks/${id}/test`)).body).toEqual({ errors: { conflict: 'webhook is inactive (is_active: false): nothing is fired' } });
    expect((await s.admin('PATCH', `/webhooks/${id}`, { is_active: true })).body).toMatchObject({ is_active: true, status: 'active' });
    expect((await s.admin('PATCH', `/webhooks/${id}`, { is_active: 'no' })).body).toEqual({ errors: { bad_request: { is_active: ['must be a boolean'] } } });
    expect((await s.admin('PATCH', `/webhooks/${id}`, { url: 'https://x.example.com/' })).status).toBe(400);
    expect((await s.admin('GET', '/webhooks/not-a-uuid')).body).toEqual({ errors: { bad_request: { id: ['must be a valid UUID'] } } });
    const unknown = '6a2f41a3-c54c-4ce8-92d2-0324e1c32e22';
    expect((await s.admin('GET', `/webhooks/${unknown}`)).body).toEqual({ errors: { not_found: 'webhook not found' } });
    expect((await s.admin('GET', `/webhooks/${unknown}/deliveries`)).status).toBe(404);
    expect((await s.admin('GET', `/webhooks/${id}/deliveries/${unknown}`)).body).toEqual({ errors: { not_found: 'delivery not found' } });
    expect((await s.admin('POST', `/webhooks/${id}/deliveries/${unknown}/resend`)).status).toBe(404);
    expect((await s.admin('GET', `/webhooks/${id}/deliveries?status=lost`)).status).toBe(400);

    expect((await fx.client.delete(`/webhooks/${id}`)).status).toBe(204);
    const gone = await s.admin('GET', `/webhooks/${id}`);
    expect(gone.body).toMatchObject({ status: 'deleted', deleted_at: expect.stringMatching(ISO_Z) });
    expect((await s.admin('GET', `/webhooks?merchant_id=${fx.merchantId}`)).body.webhooks).toEqual([]);
    expect((await s.admin('GET', `/webhooks?merchant_id=${fx.merchantId}&include_deleted=true`)).body.webhooks).toHaveLength(1);
    expect((await s.admin('PATCH', `/webhooks/${id}`, { is_active: true })).body).toEqual({ errors: { conflict: 'webhook is deleted' } });
    expect((await s.admin('POST', `/webhooks/${id}/test`)).status).toBe(409);

    const anonymous = await fetch(`${s.url}/api/admin/webhooks`);
    expect(anonymous.status).toBe(401);
  });
});
