import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BACKENDS } from '../helpers/db.js';
import { merchantWithKey } from '../helpers/client.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { requeueFailedSince } from '../../src/webhooks/deliveriesRepo.js';
import { findWebhook } from '../../src/webhooks/repository.js';
import { redeliverFailedSince } from '../../src/webhooks/service.js';
import { emit, startReceiver, waitUntil, type Receiver } from './helpers.js';

/**
 * "Redeliver every failed delivery since …" (src/webhooks/service.ts redeliverFailedSince): only
 * deliveries failed for good since the moment, at most a bound a time with the rest counted, each
 * through the delivery queue once (the same delivery id, in its subject's order), `since` within
 * 30 days and not in the future.
 */
describe.each(BACKENDS)('redeliver failed webhook deliveries on %s', (backend) => {
  let s: TestServer;
  let r: Receiver;
  let failing = true;
  beforeAll(async () => {
    r = await startReceiver((_req, res) => void res.writeHead(failing ? 500 : 200).end(failing ? 'down' : 'ok'));
    s = await startTestServer({ backend, env: { WEBHOOK_ALLOWED_HOSTS: r.hostPort, WEBHOOK_RETRY_SCHEDULE: '50ms', WEBHOOK_TIMEOUT_MS: '3000' } });
  });
  afterAll(async () => {
    await s?.close();
    await r?.close();
  });

  it('takes at most the bound, counts the rest, sends each failed delivery once, and a repeat takes nothing', async () => {
    const fx = await merchantWithKey(s);
    const created = await fx.client.post('/webhooks', { url: `${r.url}/re`, events: ['pix.charge.paid'], allow_insecure: true });
    const id = created.body.id as string;
    const start = new Date(Date.now() - 1000);
    // three events of one subject and one of another, all failing for good
    for (const subject of ['RE-1', 'RE-1', 'RE-1', 'RE-2']) await emit(s.ctx.db, { merchantId: fx.merchantId, accountId: fx.accountId, subject });
    const failed = async () => (await s.ctx.db.query<{ n: number }>(`SELECT count(*)::int AS n FROM webhook_deliveries WHERE webhook_id = $1 AND status = 'failed'`, [id]))[0]!.n;
    await waitUntil(async () => (await failed()) === 4);
    failing = false;
    const sent = r.received.length;

    // a bound of 3: three go back in the queue, one is counted as remaining
    expect(await s.ctx.db.transaction((tx) => requeueFailedSince(tx, id, start, 3))).toEqual({ requeued: 3, remaining: 1 });
    await waitUntil(() => r.received.length === sent + 3);
    // the rest through the service (bound 500); then nothing is left, and a repeat requeues nothing
    const w = (await findWebhook(s.ctx.db, id))!;
    await waitUntil(async () => (await failed()) === 1);
    expect(await redeliverFailedSince(s.ctx, w, start)).toEqual({ requeued: 1, remaining: 0 });
    await waitUntil(() => r.received.length === sent + 4);
    expect(await redeliverFailedSince(s.ctx, w, start)).toEqual({ requeued: 0, remaining: 0 });
    const ids = r.received.slice(sent).map((x) => x.headers['webhook-id']);
    expect(new Set(ids).size).toBe(4); // each delivery once, under its own id
    // each recorded delivered once its answer is written (after the receiver saw it)
    await waitUntil(async () => (await s.ctx.db.query<{ n: number }>(`SELECT count(*)::int AS n FROM webhook_deliveries WHERE webhook_id = $1 AND status = 'delivered'`, [id]))[0]!.n === 4);
    const rows = await s.ctx.db.query<{ id: string; status: string }>(`SELECT id, status FROM webhook_deliveries WHERE webhook_id = $1`, [id]);
    expect(new Set(ids)).toEqual(new Set(rows.map((x) => x.id)));
    // RE-1's three went out in their order
    const re1 = r.received.slice(sent).filter((x) => x.body.transaction_id === 'RE-1').map((x) => x.headers['webhook-id']);
    const order = await s.ctx.db.query<{ id: string }>(`SELECT id FROM webhook_deliveries WHERE webhook_id = $1 AND subject = 'RE-1' ORDER BY outbox_id`, [id]);
    expect(re1).toEqual(order.map((x) => x.id));
  });

  it('refuses a moment more than 30 days back or in the future on the since field', async () => {
    const fx = await merchantWithKey(s);
    const created = await fx.client.post('/webhooks', { url: `${r.url}/re2`, events: ['pix.charge.paid'], allow_insecure: true });
    const w = (await findWebhook(s.ctx.db, created.body.id))!;
    for (const since of [new Date(Date.now() - 31 * 86_400_000), new Date(Date.now() + 3_600_000), new Date(Number.NaN)]) {
      await expect(redeliverFailedSince(s.ctx, w, since)).rejects.toMatchObject({ code: 'bad_request', fields: { since: ['must be within the last 30 days'] } });
    }
  });
});
