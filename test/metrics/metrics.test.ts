import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { addPixKey, merchantWithKey, type MerchantFixture } from '../helpers/client.js';
import { BACKENDS } from '../helpers/db.js';
import { foreignKey, sandbox, SIM_FAST, waitFor } from '../helpers/pix.js';
import { startTestServer, TEST_ADMIN_TOKEN, type TestServer } from '../helpers/server.js';
import { startReceiver, type Receiver } from '../webhooks/helpers.js';

/** Parses the Prometheus text format into `name{labels}` → value. */
function parse(text: string): Map<string, number> {
  const out = new Map<string, number>();
  for (const line of text.split('\n')) {
    if (line === '' || line.startsWith('#')) continue;
    const at = line.lastIndexOf(' ');
    out.set(line.slice(0, at), Number(line.slice(at + 1)));
  }
  return out;
}

/** The sum of every series of `name` whose labels contain all of `labels`. */
function sum(m: Map<string, number>, name: string, labels: Record<string, string> = {}): number {
  let total = 0;
  for (const [series, value] of m) {
    const brace = series.indexOf('{');
    const base = brace < 0 ? series : series.slice(0, brace);
    if (base !== name) continue;
    if (Object.entries(labels).every(([k, v]) => series.includes(`${k}="${v}"`))) total += value;
  }
  return total;
}

describe.each(BACKENDS)('GET /metrics on %s', (backend) => {
  let s: TestServer;
  let m: MerchantFixture;
  let receiver: Receiver;

  beforeAll(async () => {
    receiver = await startReceiver();
    s = await startTestServer({ backend, env: { ...SIM_FAST, WEBHOOK_ALLOWED_HOSTS: `127.0.0.1:${receiver.port}`, RATE_LIMIT_PER_MINUTE: '1000' } });
    m = await merchantWithKey(s, { depositCents: 1_000_000 });
    await addPixKey(s, m.accountId, 'evp');
  });
  afterAll(async () => {
    await s?.close();
    await receiver?.close();
  });

  const scrape = async () => {
    const res = await fetch(`${s.url}/metrics`, { headers: { authorization: `Bearer ${TEST_ADMIN_TOKEN}` } });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^text\/plain/);
    return parse(await res.text());
  };

  it('is refused without the admin token', async () => {
    expect((await fetch(`${s.url}/metrics`)).status).toBe(401);
    expect((await fetch(`${s.url}/metrics`, { headers: { authorization: 'Bearer nope' } })).status).toBe(401);
  });

  it('has the process metrics (memory, event-loop lag)', async () => {
    const before = await scrape();
    expect(sum(before, 'pixgate_process_resident_memory_bytes')).toBeGreaterThan(0);
    expect([...before.keys()].some((k) => k.startsWith('pixgate_nodejs_eventloop_lag_seconds'))).toBe(true);
    if (backend === 'postgres') {
      expect(before.has('pixgate_db_pool_connections{state="in_use"}')).toBe(true);
      expect(before.has('pixgate_db_pool_connections{state="waiting"}')).toBe(true);
    }
  });

  it('moves each metric when its action happens', async () => {
    const before = await scrape();
    const route = '/api/external/balance';
    expect(sum(before, 'pixgate_http_requests_total', { route })).toBe(0);

    // HTTP by route pattern and status
    expect((await m.client.get('/balance')).status).toBe(200);
    // a webhook (to see deliveries) and a charge, cash-out, refund
    const hook = await m.client.post('/webhooks', { url: `http://127.0.0.1:${receiver.port}/hook`, events: ['pix.charge.created', 'pix.payout.confirmed', 'tef.transfer.sent'], allow_insecure: true });
    expect(hook.status).toBe(201);
    const charge = await m.client.post('/pix/cash-in', { amount: 1500 });
    expect(charge.status).toBeLessThan(300);
    const key = await foreignKey(s, { behavior: 'settle' });
    const out = await m.client.post('/pix/cash-out', { amount: 1000, pix_key: key, external_id: 'metrics-1' }, { idempotencyKey: 'metrics-idem-1' });
    expect(out.status).toBe(200);
    // idempotency replay
    const replay = await m.client.post('/pix/cash-out', { amount: 1000, pix_key: key, external_id: 'metrics-1' }, { idempotencyKey: 'metrics-idem-1' });
    expect(replay.headers.get('x-idempotent-replay')).toBe('true');
    const inbound = await sandbox(s, 'POST', '/pix/inbound', { account_id: m.accountId, amount: 3000 });
    expect(inbound.status).toBe(201);
    const refund = await m.client.post('/pix/refund', { original_transaction_id: inbound.body.transaction_id, amount: 500 });
    expect(refund.status).toBeLessThan(300);
    // a TEF to another merchant
    const other = await merchantWithKey(s);
    const tef = await m.client.post('/tef/transfers', { amount: 700, account_id: other.accountId, external_id: 'metrics-tef' });
    // rate limit: the admin authentication limiter answers 429 after 5 failures
    for (let i = 0; i < 6; i++) await fetch(`${s.url}/api/admin/merchants`, { headers: { authorization: 'Bearer wrong' } });

    await waitFor(
      () => s.ctx.db.query<{ n: number }>(`SELECT count(*)::bigint AS n FROM webhook_deliveries WHERE status = 'delivered'`),
      (rows) => rows[0]!.n >= 2,
    );
    const after = await waitFor(scrape, (x) => sum(x, 'pixgate_cash_outs_total', { outcome: 'confirmed' }) >= 1);

    const moved = (name: string, labels: Record<string, string> = {}) => sum(after, name, labels) - sum(before, name, labels);
    expect(moved('pixgate_http_requests_total', { route, status: '200' })).toBe(1);
    expect(moved('pixgate_http_request_duration_seconds_count', { route, status: '200' })).toBe(1);
    expect(moved('pixgate_http_requests_total', { route: '/api/external/pix/cash-out', status: '200' })).toBe(2);
    expect(moved('pixgate_idempotency_replays_total', { route: '/api/external/pix/cash-out' })).toBe(1);
    expect(moved('pixgate_rate_limit_rejections_total')).toBeGreaterThanOrEqual(1);
    expect(moved('pixgate_charges_total', { outcome: 'created' })).toBe(1);
    expect(moved('pixgate_cash_outs_total', { outcome: 'processing' })).toBe(1);
    expect(moved('pixgate_cash_outs_total', { outcome: 'confirmed' })).toBe(1);
    await waitFor(scrape, (x) => sum(x, 'pixgate_refunds_total') >= 1);
    if (tef.status === 201 || tef.status === 200) {
      await waitFor(scrape, (x) => sum(x, 'pixgate_tef_transfers_total', { outcome: 'sent' }) >= 1);
    }
    expect(moved('pixgate_rail_request_duration_seconds_count', { operation: 'sendPayment', outcome: 'accepted' })).toBe(1);
    expect(moved('pixgate_rail_request_duration_seconds_count', { operation: 'lookupKey' })).toBeGreaterThanOrEqual(1);
    // Group commit: the cash-out's reserve and step 3, the look-up and the order (one cash-out and
    // its idempotent repeat: one reserve batch of one item; the repeat is answered before it).
    expect(moved('pixgate_batch_items_count', { batcher: 'cash_out_reserve' })).toBe(1);
    expect(moved('pixgate_batch_items_sum', { batcher: 'cash_out_reserve' })).toBe(1);
    expect(moved('pixgate_batch_items_count', { batcher: 'cash_out_sent' })).toBe(1);
    expect(moved('pixgate_batch_duration_seconds_count', { batcher: 'cash_out_reserve', phase: 'wait' })).toBe(1);
    expect(moved('pixgate_batch_duration_seconds_count', { batcher: 'cash_out_reserve', phase: 'run' })).toBe(1);
    expect(moved('pixgate_batch_duration_seconds_sum', { batcher: 'cash_out_reserve', phase: 'run' })).toBeGreaterThan(0);
    expect(moved('pixgate_batch_items_count', { batcher: 'sim_order' })).toBeGreaterThanOrEqual(1);
    expect(moved('pixgate_batch_items_count', { batcher: 'balance_read' })).toBe(1);
    expect(moved('pixgate_batch_items_count', { batcher: 'sim_lookup' })).toBeGreaterThanOrEqual(1);
    expect(moved('pixgate_webhook_attempts_total', { outcome: 'ok' })).toBeGreaterThanOrEqual(2);
    expect(moved('pixgate_webhook_deliveries_total', { outcome: 'delivered' })).toBeGreaterThanOrEqual(2);
    expect(moved('pixgate_webhook_attempt_duration_seconds_count')).toBeGreaterThanOrEqual(2);
    expect(after.has('pixgate_webhook_backlog')).toBe(true);
    expect(after.has('pixgate_outbox_lag_seconds')).toBe(true);
  });

  it('reports the webhook backlog, the oldest undelivered age and the outbox lag from the database', async () => {
    // Pause delivery: stop the workers, write an event and a pending delivery, scrape.
    await Promise.all(s.ctx.workers.map((w) => w.stop()));
    try {
      // Whatever the earlier actions left undispatched is set aside, so the oldest event is ours.
      await s.ctx.db.query(`DELETE FROM outbox_pending`);
      await s.ctx.db.query(
        `INSERT INTO outbox_events (event, merchant_id, account_id, subject, payload, created_at)
         VALUES ('pix.charge.created', $1, $2, 'metrics-lag', '{}'::jsonb, now() - interval '42 seconds')`,
        [m.merchantId, m.accountId],
      );
      const [w] = await s.ctx.db.query<{ id: string }>(`SELECT id FROM webhooks WHERE merchant_id = $1 LIMIT 1`, [m.merchantId]);
      const [e] = await s.ctx.db.query<{ id: number }>(`SELECT id FROM outbox_events WHERE subject = 'metrics-lag'`);
      await s.ctx.db.query(
        `INSERT INTO webhook_deliveries (webhook_id, outbox_id, event, subject, created_at, next_attempt_at, event_created_at)
         SELECT $1, $2, 'pix.charge.created', 'metrics-lag', now() - interval '90 seconds', now() + interval '1 hour', o.created_at
           FROM outbox_events o WHERE o.id = $2`,
        [w!.id, e!.id],
      );
      await new Promise((r) => setTimeout(r, 300)); // the database gauges are read at most every 250 ms
      const x = await scrape();
      expect(sum(x, 'pixgate_webhook_backlog')).toBeGreaterThanOrEqual(1);
      expect(sum(x, 'pixgate_webhook_oldest_undelivered_age_seconds')).toBeGreaterThanOrEqual(89);
      expect(sum(x, 'pixgate_outbox_lag_seconds')).toBeGreaterThanOrEqual(41);
      expect(sum(x, 'pixgate_outbox_pending')).toBeGreaterThanOrEqual(1);
    } finally {
      for (const w of s.ctx.workers) w.start();
    }
  });
});

describe('METRICS_PORT', () => {
  it('serves the same registry without a token on its own port, and nothing else', async () => {
    const probe = await import('node:net').then((net) => {
      const srv = net.createServer();
      return new Promise<number>((resolve) => srv.listen(0, '127.0.0.1', () => {
        const port = (srv.address() as import('node:net').AddressInfo).port;
        srv.close(() => resolve(port));
      }));
    });
    const s = await startTestServer({ env: { METRICS_PORT: String(probe) }, workers: false });
    try {
      expect((await fetch(`${s.url}/healthz`)).status).toBe(200);
      const res = await fetch(`http://127.0.0.1:${probe}/metrics`);
      expect(res.status).toBe(200);
      const text = await res.text();
      expect(text).toContain('pixgate_http_requests_total{method="GET",route="/healthz",status="200"} 1');
      expect((await fetch(`http://127.0.0.1:${probe}/api/admin/merchants`)).status).toBe(404);
    } finally {
      await s.close();
    }
  });
});
