import pg from 'pg';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { DEFAULTS, webhookWorkers } from '../../src/webhooks/workers.js';
import { addPixKey, merchantWithKey, type MerchantFixture } from '../helpers/client.js';
import { BACKENDS, schemaAccess, type TestDatabase } from '../helpers/db.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { emitEvent } from '../../src/events/outbox.js';
import { emit, startReceiver, waitUntil, type Receiver } from './helpers.js';

/**
 * The delivery engine sleeps until woken (docs/decisions.md, "Idle: wake-ups instead of polling"):
 * these tests let its loops fall asleep on their safety net (DEFAULTS.safetyNetMs, 10 s) and check
 * that the work is done long before that net would have caught it — a wake-up did it. The bound
 * (3 s, under a third of the net) is about which mechanism acted, not about speed.
 */
const PROMPT_MS = 3_000;
const settle = () => new Promise((r) => setTimeout(r, 1_000));

describe.each(BACKENDS)('webhook wake-ups on %s', (backend) => {
  let s: TestServer;
  let r: Receiver;
  let fx: MerchantFixture;
  beforeAll(async () => {
    expect(DEFAULTS.safetyNetMs).toBeGreaterThanOrEqual(3 * PROMPT_MS);
    r = await startReceiver();
    s = await startTestServer({ backend, env: { WEBHOOK_ALLOWED_HOSTS: r.hostPort, WEBHOOK_RETRY_SCHEDULE: '300ms', WEBHOOK_TIMEOUT_MS: '3000' } });
    fx = await merchantWithKey(s);
    await addPixKey(s, fx.accountId, 'evp');
  });
  afterAll(async () => {
    await s?.close();
    await r?.close();
  });

  it('an event is delivered right after the state change that wrote it, with the workers asleep', async () => {
    await fx.client.post('/webhooks', { url: `${r.url}/created`, events: ['pix.charge.created'], allow_insecure: true });
    await settle();
    const started = Date.now();
    const charge = await fx.client.post('/pix/cash-in', { amount: 1590 });
    expect(charge.status).toBe(201);
    await r.waitFor((x) => x.some((y) => y.path === '/created' && y.body.transaction_id === charge.body.transaction_id), PROMPT_MS);
    expect(Date.now() - started).toBeLessThan(PROMPT_MS);
  });

  it('a retry goes out when its backoff ends (the sender sleeps until the earliest due delivery)', async () => {
    const hook = await fx.client.post('/webhooks', { url: `${r.url}/retried`, events: ['pix.charge.paid'], allow_insecure: true });
    await settle();
    // The first attempt fails; the retry is due 300 ms later.
    const before = r.received.length;
    r.handler = (_req, res, got) => {
      if (got.path === '/retried' && got.headers['x-service-attempt'] === '1') return void res.writeHead(503).end();
      res.writeHead(200).end();
    };
    try {
      await emit(s.ctx.db, { merchantId: fx.merchantId, accountId: fx.accountId, subject: 'RETRY-1' });
      await r.waitFor((x) => x.slice(before).filter((y) => y.path === '/retried').length === 2, PROMPT_MS);
      const attempts = r.received.slice(before).filter((y) => y.path === '/retried');
      expect(attempts.map((y) => y.headers['x-service-attempt'])).toEqual(['1', '2']);
      const gap = attempts[1]!.at - attempts[0]!.at;
      expect(gap).toBeGreaterThanOrEqual(200); // 300 ms ± 20 % jitter: not before its time
      await waitUntil(async () => (await s.admin('GET', `/webhooks/${hook.body.id}`)).body.deliveries.delivered === 1, PROMPT_MS);
    } finally {
      r.handler = (_req, res) => void res.writeHead(200).end();
    }
  });

  it('the safety net finds work no wake-up announced', async () => {
    const hook = await fx.client.post('/webhooks', { url: `${r.url}/silent`, events: ['pix.charge.paid'], allow_insecure: true });
    // Workers of this test only (the server's sleep on their 10 s net): a short net of 300 ms.
    const own = webhookWorkers(s.ctx, { safetyNetMs: 300 });
    for (const w of own) w.start();
    try {
      await settle();
      // An event written behind the dispatchers' backs: no wakeLocal, no NOTIFY.
      await s.ctx.db.query(
        `INSERT INTO outbox_events (event, merchant_id, account_id, subject, payload)
         VALUES ('pix.charge.paid', $1, $2, 'SILENT-1', '{"event":"pix.charge.paid","status":"paid","transaction_id":"SILENT-1"}'::jsonb)`,
        [fx.merchantId, fx.accountId],
      );
      await r.waitFor((x) => x.some((y) => y.path === '/silent'), PROMPT_MS);
      await waitUntil(async () => (await s.admin('GET', `/webhooks/${hook.body.id}`)).body.deliveries.delivered === 1, PROMPT_MS);
    } finally {
      for (const w of own) await w.stop();
    }
  });
});

const pgOnly = BACKENDS.includes('postgres') ? describe : describe.skip;

pgOnly('webhook wake-ups across processes on PostgreSQL', () => {
  const url = process.env.TEST_DATABASE_URL!;
  let a: TestServer;
  let b: TestServer;
  let r: Receiver;
  let admin: pg.Client;
  beforeAll(async () => {
    r = await startReceiver();
    const env = { WEBHOOK_ALLOWED_HOSTS: r.hostPort, WEBHOOK_TIMEOUT_MS: '3000' };
    // A: serves the API, runs no workers. B: another process on the same database (its own pool
    // and its own listening connection), running the workers.
    a = await startTestServer({ backend: 'postgres', workers: false, env });
    const schema = (await a.ctx.db.query<{ schema: string }>('SELECT current_schema() AS schema'))[0]!.schema;
    const other = await schemaAccess(schema).open({ max: 5, applicationName: `pixgate-b-${schema}` });
    const database: TestDatabase = { db: other, backend: 'postgres', close: () => other.close(), reopen: () => Promise.reject(new Error('not here')) };
    b = await startTestServer({ database, env });
    admin = new pg.Client({ connectionString: url });
    await admin.connect();
  });
  afterEach(() => {
    r.handler = (_req, res) => void res.writeHead(200).end();
  });
  afterAll(async () => {
    await b?.close();
    await b?.database.db.close();
    await a?.close();
    await admin?.end();
    await r?.close();
  });

  it('a delivery made due in one process (re-send) wakes the senders of another (NOTIFY)', async () => {
    const fx = await merchantWithKey(a);
    const hook = await fx.client.post('/webhooks', { url: `${r.url}/resend`, events: ['pix.charge.paid'], allow_insecure: true });
    await emit(b.ctx.db, { merchantId: fx.merchantId, accountId: fx.accountId, subject: 'RESEND-1' });
    await r.waitFor((x) => x.filter((y) => y.path === '/resend').length === 1, PROMPT_MS);
    const [d] = (await a.admin('GET', `/webhooks/${hook.body.id}/deliveries`)).body.deliveries;
    await waitUntil(async () => (await a.admin('GET', `/webhooks/${hook.body.id}/deliveries/${d.id}`)).body.status === 'delivered', PROMPT_MS);
    await settle();
    const started = Date.now();
    expect((await a.admin('POST', `/webhooks/${hook.body.id}/deliveries/${d.id}/resend`)).status).toBe(202);
    await r.waitFor((x) => x.filter((y) => y.path === '/resend').length === 2, PROMPT_MS);
    expect(Date.now() - started).toBeLessThan(PROMPT_MS);
  });

  it('after the listening connection is lost, the sender looks for work at once (handler null)', async () => {
    const fx = await merchantWithKey(a);
    const hook = await fx.client.post('/webhooks', { url: `${r.url}/lost`, events: ['pix.charge.paid'], allow_insecure: true });
    await emit(b.ctx.db, { merchantId: fx.merchantId, accountId: fx.accountId, subject: 'LOST-1' });
    await r.waitFor((x) => x.filter((y) => y.path === '/lost').length === 1, PROMPT_MS);
    const [d] = (await a.admin('GET', `/webhooks/${hook.body.id}/deliveries`)).body.deliveries;
    await waitUntil(async () => (await a.admin('GET', `/webhooks/${hook.body.id}/deliveries/${d.id}`)).body.status === 'delivered', PROMPT_MS);
    await settle();
    // The delivery is made due again without any wake-up (a plain UPDATE, as if its notification
    // had been lost), then B's listening connection dies: only the `null` its handlers are told on
    // reconnection can wake B's sender before its 10 s safety net.
    await b.ctx.db.query(
      `UPDATE webhook_deliveries SET status = 'pending', ready = true, retry_step = 0, next_attempt_at = now(), delivered_at = NULL WHERE id = $1`,
      [d.id],
    );
    const schema = (await b.ctx.db.query<{ schema: string }>('SELECT current_schema() AS schema'))[0]!.schema;
    const started = Date.now();
    const terminated = await admin.query(`SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1`, [`pixgate-b-${schema}-listen`]);
    expect(terminated.rowCount).toBe(1);
    await r.waitFor((x) => x.filter((y) => y.path === '/lost').length === 2, PROMPT_MS);
    expect(Date.now() - started).toBeLessThan(PROMPT_MS);
  });
});

describe.each(BACKENDS)('webhook sender wake-ups on %s', (backend) => {
  it('events no webhook subscribes to are fanned out without waking the sender (no statement of it)', async () => {
    const s = await startTestServer({ backend, workers: false });
    try {
      const fx = await merchantWithKey(s);
      // The workers of this test run on a counted view of the database: their statements only.
      const db = s.ctx.db.counted('probe_webhooks');
      const count = () => db.statements().probe_webhooks ?? 0;
      const own = webhookWorkers({ ...s.ctx, db });
      for (const w of own) w.start();
      try {
        await settle();
        const before = count();
        await s.ctx.db.transaction(async (tx) => {
          for (let i = 0; i < 5; i++) {
            await emitEvent(tx, { event: 'pix.charge.paid', merchantId: fx.merchantId, accountId: fx.accountId, subject: `NOBODY-${i}`, payload: { transaction_id: `NOBODY-${i}` } });
          }
        });
        await waitUntil(async () => (await s.ctx.db.query<any>('SELECT count(*)::int AS n FROM outbox_pending'))[0].n === 0, PROMPT_MS);
        await settle();
        // The fan-out (and a second, empty look: each emitEvent wakes the dispatcher once its
        // transaction commits). A woken sender would add its claim and its look at the next due
        // time: 4 before the dispatcher woke it only for deliveries.
        expect(count() - before).toBeLessThanOrEqual(2);
      } finally {
        for (const w of own) await w.stop();
      }
    } finally {
      await s.close();
    }
  });
});
