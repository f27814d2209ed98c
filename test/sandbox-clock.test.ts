import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { addDays } from '../src/boleto/barcode.js';
import { brasiliaToday } from '../src/boleto/service.js';
import { MED } from '../src/med/infractions.js';
import { runRetention } from '../src/retention/retention.js';
import { addPixKey, merchantWithKey, type MerchantFixture } from './helpers/client.js';
import { BACKENDS } from './helpers/db.js';
import { received, reportInfraction } from './helpers/med.js';
import { outbox, sandbox, SIM_FAST, waitFor, txRow } from './helpers/pix.js';
import { startTestServer, type TestServer } from './helpers/server.js';
import { centralClient, newAccount } from './boleto/helpers.js';
import { startReceiver, type Receiver } from './webhooks/helpers.js';

const DAY = 86_400;

const clockOf = (s: TestServer) => sandbox(s, 'GET', '/clock');
const advance = (s: TestServer, body: unknown) => sandbox(s, 'POST', '/clock/advance', body);

/** Seconds from `a` to `b` (ISO or Date). */
const secondsBetween = (a: string | Date, b: string | Date) => (new Date(b).getTime() - new Date(a).getTime()) / 1000;

/**
 * The sandbox clock (issue 28, docs/sandbox-clock.md) on the system clock, as an installation runs:
 * workers sleep in real time until their deadlines, and an advance must wake them.
 */
describe.each(BACKENDS)('sandbox clock on %s', (backend) => {
  let s: TestServer;
  let r: Receiver;
  let m: MerchantFixture;
  beforeAll(async () => {
    r = await startReceiver();
    s = await startTestServer({ backend, env: { ...SIM_FAST, WEBHOOK_ALLOWED_HOSTS: r.hostPort, WEBHOOK_RETRY_SCHEDULE: '1h,1h,1h' } });
    m = await merchantWithKey(s, { depositCents: 1_000_000 });
    await addPixKey(s, m.accountId, 'evp');
  });
  afterAll(async () => {
    await s?.close();
    await r?.close();
  });

  it('GET /clock answers simulated now and the offset (0 on a fresh installation)', async () => {
    const res = await clockOf(s);
    expect(res.status).toBe(200);
    expect(Object.keys(res.body).sort()).toEqual(['now', 'offset_seconds']);
    expect(res.body.offset_seconds).toBe(0);
    expect(Math.abs(secondsBetween(res.body.now, new Date()))).toBeLessThan(5);
  });

  it('refuses what is not a forward advance with a 400 in the sandbox shape, and moves nothing', async () => {
    const before = (await clockOf(s)).body.offset_seconds;
    const cases: Array<[unknown, string]> = [
      [{ seconds: 0 }, 'must be greater than or equal to 1'],
      [{ seconds: -60 }, 'must be greater than or equal to 1'],
      [{ seconds: 1.5 }, 'must be an integer'],
      [{ seconds: '60' }, 'must be a number'],
      [{ seconds: 366 * DAY + 1 }, 'must be less than or equal to 31622400'],
    ];
    for (const [body, message] of cases) {
      const res = await advance(s, body);
      expect(res.status, JSON.stringify(body)).toBe(400);
      expect(res.body, JSON.stringify(body)).toEqual({ errors: { bad_request: { seconds: [message] } } });
    }
    const missing = await advance(s, {});
    expect(missing.status).toBe(400);
    expect(Object.keys(missing.body.errors.bad_request)).toEqual(['seconds']);
    const extra = await advance(s, { seconds: 5, backwards: true });
    expect(extra.status).toBe(400);
    expect((await clockOf(s)).body.offset_seconds).toBe(before);
  });

  it('done-when: a 60-second charge expires after an advance of 120 s, and pix.charge.expired reaches the webhook with simulated times', async () => {
    const hook = await m.client.post('/webhooks', { url: `${r.url}/expired`, events: ['pix.charge.expired'], allow_insecure: true });
    expect(hook.status).toBe(201);
    const charge = await m.client.post('/pix/cash-in', { amount: 2500, expires_in: 60 });
    expect(charge.status).toBe(201);
    const before = (await clockOf(s)).body.offset_seconds;

    const moved = await advance(s, { seconds: 120 });
    expect(moved.status).toBe(200);
    expect(moved.body.offset_seconds).toBe(before + 120);
    expect(secondsBetween(new Date(), moved.body.now)).toBeGreaterThan(before + 120 - 10); // less the answer's latency on a loaded machine

    // Woken by the advance: the worker was asleep until the charge's (real-time) deadline, a minute away.
    await r.waitFor((x) => x.some((y) => y.body.transaction_id === charge.body.transaction_id), 10_000);
    const delivered = r.received.find((y) => y.body.transaction_id === charge.body.transaction_id)!;
    expect(delivered.headers['x-service-event']).toBe('pix.charge.expired');
    expect(delivered.body).toMatchObject({ event: 'pix.charge.expired', status: 'expired', expires_at: charge.body.expires_at, expired_at: charge.body.expires_at });
    expect((await m.client.get(`/pix/cash-in/${charge.body.transaction_id}`)).body).toMatchObject({ status: 'expired' });
    // Security windows stayed on real time: this signed request (timestamp of now, real) passed.
    expect((await m.client.get('/balance')).status).toBe(200);
  });

  it('events carry simulated time: a charge created after an advance is stamped and expires in simulated time', async () => {
    const { offset_seconds: offset } = (await clockOf(s)).body;
    const charge = await m.client.post('/pix/cash-in', { amount: 1000, expires_in: 3600 });
    expect(charge.status).toBe(201);
    expect(secondsBetween(new Date(), charge.body.created_at)).toBeGreaterThanOrEqual(offset - 5);
    expect(secondsBetween(charge.body.created_at, charge.body.expires_at)).toBe(3600);
    const [created] = await outbox(s.ctx.db, charge.body.transaction_id);
    expect(created!.payload.created_at).toBe(charge.body.created_at);
    // The events feed dates the event in simulated time too (its row is stamped in real time).
    // (Listed once no older transaction is still running: migration 0540.)
    const listed = await waitFor(
      async () => (await m.client.get('/events?limit=500')).body.events.find((e: { subject: string; event: string }) => e.subject === charge.body.transaction_id && e.event === 'pix.charge.created'),
      (e) => e !== undefined,
    );
    expect(Math.abs(secondsBetween(charge.body.created_at, listed.created_at))).toBeLessThan(5);
  });

  it('a webhook retry due in simulated time runs at once after an advance', async () => {
    const hook = await m.client.post('/webhooks', { url: `${r.url}/retry`, events: ['pix.charge.paid'], allow_insecure: true });
    expect(hook.status).toBe(201);
    let answered = 0;
    r.handler = (req, res) => {
      if (req.url === '/retry' && answered++ === 0) res.writeHead(500).end('try later');
      else res.writeHead(200, { 'content-type': 'application/json' }).end('{"ok":true}');
    };
    const pix = await received(s, m, 700);
    const mine = () => r.received.filter((y) => y.path === '/retry' && y.body.transaction_id === pix.transaction_id);
    await r.waitFor(() => mine().length === 1);
    const [delivery] = await s.ctx.db.query<{ id: string; next_attempt_at: Date; status: string }>(
      `SELECT d.id, d.next_attempt_at, d.status FROM webhook_deliveries d JOIN outbox_events o ON o.id = d.outbox_id AND o.created_at = d.event_created_at
        WHERE d.webhook_id = $1 AND o.subject = $2`,
      [hook.body.id, pix.transaction_id],
    );
    await waitFor(
      async () => (await s.ctx.db.query<{ attempts: number }>('SELECT attempts, claim_token FROM webhook_deliveries WHERE id = $1 AND claim_token IS NULL', [delivery!.id]))[0],
      (row) => row?.attempts === 1,
    );
    // The first retry is an hour away (WEBHOOK_RETRY_SCHEDULE=1h,…): nothing more arrives by itself.
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(mine()).toHaveLength(1);

    expect((await advance(s, { seconds: 2 * 3600 })).status).toBe(200);
    // Woken by the advance, well before the sender's 10-second safety-net poll would find it.
    await r.waitFor(() => mine().length === 2, 6_000);
    expect(mine()[1]!.body).toEqual(mine()[0]!.body);
    r.handler = (_req, res) => void res.writeHead(200, { 'content-type': 'application/json' }).end('{"ok":true}');
  });

  it('a MED defense deadline passes with the clock', async () => {
    const pix = await received(s, m, 5000);
    const opened = await reportInfraction(s, { end_to_end_id: pix.end_to_end_id, reason: 'golpe' });
    expect(opened.status).toBe(201);
    const id = opened.body.id as string;
    const now = (await clockOf(s)).body.now;
    expect(secondsBetween(now, opened.body.defense_deadline)).toBeGreaterThan(MED.defenseWindowMs / 1000 - 10);

    expect((await advance(s, { seconds: MED.defenseWindowMs / 1000 + 60 })).status).toBe(200);
    const late = await m.client.post(`/med/${id}/defense`, { text: 'entreguei o produto' });
    expect(late.status).toBe(422);
    expect(JSON.stringify(late.body)).toContain(`The defense deadline passed at ${opened.body.defense_deadline}`);
  });

  it('a refund window closes with the clock: MD06 past 90 days fails with RETURN_DEADLINE_EXCEEDED', async () => {
    const pix = await received(s, m, 3000);
    const early = await m.client.post('/pix/refund', { original_transaction_id: pix.transaction_id, amount: 100 });
    expect(early.status).toBe(202);
    const done = await waitFor(() => txRow(s.ctx.db, early.body.transaction_id), (row) => row.stage === 3);
    expect(done.payment_status).toBe('settled');

    expect((await advance(s, { seconds: 91 * DAY })).status).toBe(200);
    const late = await m.client.post('/pix/refund', { original_transaction_id: pix.transaction_id, amount: 100 });
    expect(late.status).toBe(202);
    await waitFor(() => txRow(s.ctx.db, late.body.transaction_id), (row) => row.stage === 3 || row.status === 4);
    const events = await outbox(s.ctx.db, late.body.transaction_id);
    expect(events.map((e) => e.event)).toEqual(['pix.refund.failed']);
    expect(events[0]!.payload).toMatchObject({ reason_code: 'RETURN_DEADLINE_EXCEEDED', reason: 'MD06' });
  });

  it('boleto due dates are judged on the simulated calendar', async () => {
    const client = await centralClient(s, { accountId: await newAccount(s) });
    const realToday = brasiliaToday(new Date());
    const { now } = (await clockOf(s)).body;
    const simulatedToday = brasiliaToday(new Date(now));
    expect(simulatedToday > realToday).toBe(true);
    const boleto = (due: string, n: string) => ({
      nosso_numero: n,
      amount_cents: 15_990,
      due_date: due,
      payer_document: '52998224725',
      payer_name: 'Maria da Silva',
      beneficiary_ispb: '60746948',
      beneficiary_name: 'Escola Horizonte Ltda',
    });
    const stale = await client.call('POST', '/boletos', { boleto: boleto(addDays(realToday, 1), `${Date.now() % 1e8}1`) });
    expect(stale.status).toBe(400);
    expect(stale.body.error.details.fields['boleto.due_date']![0]).toMatch(new RegExp(`^must be between ${simulatedToday} and `));
    const ok = await client.call('POST', '/boletos', { boleto: boleto(simulatedToday, `${Date.now() % 1e8}2`) });
    expect(ok.status).toBe(201);
  });
});

describe('sandbox clock bounds', () => {
  it('the total offset stops at 10 years: the advance past it is a 400 and moves nothing', async () => {
    const s = await startTestServer({ workers: false });
    try {
      for (let i = 0; i < 10; i++) expect((await advance(s, { seconds: 366 * DAY })).status).toBe(200);
      expect((await clockOf(s)).body.offset_seconds).toBe(3660 * DAY);
      expect(await advance(s, { seconds: 1 })).toEqual({
        status: 400,
        body: { errors: { bad_request: { seconds: ['would move the clock more than 316224000 seconds (10 years) ahead of real time'] } } },
      });
      expect((await clockOf(s)).body.offset_seconds).toBe(3660 * DAY);
    } finally {
      await s.close();
    }
  });
});

describe('sandbox clock and security windows', () => {
  it('signatures, nonces and their retention stay on real time across an advance of 30 days', async () => {
    const s = await startTestServer({ workers: false });
    try {
      const m = await merchantWithKey(s);
      await addPixKey(s, m.accountId, 'evp');
      const nonce = 'n'.repeat(16) + Date.now();
      expect((await m.client.post('/pix/cash-in', { amount: 1000 }, { sign: 'v2', nonce })).status).toBe(201);
      expect((await advance(s, { seconds: 30 * DAY })).status).toBe(200);
      // The nonce is still remembered: the same nonce on other content is refused.
      const reused = await m.client.post('/pix/cash-in', { amount: 1001 }, { sign: 'v2', nonce });
      expect(reused.status).toBe(409);
      // Retention keeps its record (it expires 10 real minutes after the claim).
      expect((await runRetention(s.ctx)).nonces).toBe(0);
      expect((await s.ctx.db.query('SELECT 1 FROM request_nonces')).length).toBeGreaterThan(0);
      // A fresh request signed now (real time) passes; the charge it makes lives in simulated time.
      const fresh = await m.client.post('/pix/cash-in', { amount: 1002 }, { sign: 'v2' });
      expect(fresh.status).toBe(201);
      expect(secondsBetween(new Date(), fresh.body.created_at)).toBeGreaterThan(30 * DAY - 10);
    } finally {
      await s.close();
    }
  });
});

describe('sandbox clock in production', () => {
  it('the routes answer 404 like every sandbox route', async () => {
    const s = await startTestServer({ env: { APP_ENV: 'production', DATABASE_URL: 'postgres://unused/db' } });
    try {
      expect(await clockOf(s)).toEqual({ status: 404, body: { errors: { not_found: 'route not found' } } });
      expect((await advance(s, { seconds: 60 })).status).toBe(404);
      expect(s.ctx.clock).toBe(s.ctx.wallClock);
    } finally {
      await s.close();
    }
  });

  it('refuses to start on a database whose clock was advanced', async () => {
    const sandboxServer = await startTestServer({ workers: false });
    try {
      expect((await advance(sandboxServer, { seconds: 60 })).status).toBe(200);
      await expect(startTestServer({ database: sandboxServer.database, workers: false, env: { APP_ENV: 'production', DATABASE_URL: 'postgres://unused/db' } })).rejects.toThrow(
        /sandbox clock of this database is 60 s ahead/,
      );
    } finally {
      await sandboxServer.close();
    }
  });
});

describe.runIf(BACKENDS.includes('postgres'))('sandbox clock across processes on PostgreSQL', () => {
  it('two processes on one database agree on the offset: the API, their clocks and SQL business_now()', async () => {
    const a = await startTestServer({ backend: 'postgres', workers: false });
    const b = await startTestServer({ database: a.database, workers: false });
    try {
      expect((await advance(a, { seconds: 3 * DAY })).body.offset_seconds).toBe(3 * DAY);
      // B's API reads the row: it agrees at once.
      expect((await clockOf(b)).body.offset_seconds).toBe(3 * DAY);
      // B's clock followed the notification (B's GET above loaded it too; check a second advance
      // that B learns of by the notification alone).
      expect((await advance(a, { seconds: DAY })).body.offset_seconds).toBe(4 * DAY);
      await waitFor(async () => (b.ctx.clock as unknown as { offsetSeconds(): number }).offsetSeconds(), (n) => n === 4 * DAY, 5_000);
      const ahead = secondsBetween(new Date(), b.ctx.clock.now());
      expect(ahead).toBeGreaterThan(4 * DAY - 5);
      expect(ahead).toBeLessThan(4 * DAY + 5);
      const [row] = await b.ctx.db.query<{ ahead: number }>('SELECT extract(epoch FROM business_now() - now())::float8 AS ahead');
      expect(row!.ahead).toBe(4 * DAY);
      // Security stays on real time in both.
      expect(Math.abs(secondsBetween(new Date(), b.ctx.wallClock.now()))).toBeLessThan(5);
    } finally {
      await b.close();
      await a.close();
    }
  });
});

describe('sandbox clock determinism', () => {
  /** One run on a fresh installation: the same calls and advances; its events without ids and real times. */
  async function run(): Promise<unknown[]> {
    const s = await startTestServer({ env: { ...SIM_FAST } });
    try {
      const m = await merchantWithKey(s, { depositCents: 100_000 });
      await addPixKey(s, m.accountId, 'evp');
      const charge = await m.client.post('/pix/cash-in', { amount: 2500, expires_in: 60 });
      const pix = await received(s, m, 5000);
      expect((await advance(s, { seconds: 120 })).status).toBe(200);
      await waitFor(() => outbox(s.ctx.db, charge.body.transaction_id), (rows) => rows.some((r) => r.event === 'pix.charge.expired'));
      expect((await advance(s, { seconds: 91 * DAY })).status).toBe(200);
      const late = await m.client.post('/pix/refund', { original_transaction_id: pix.transaction_id, amount: 100 });
      await waitFor(() => outbox(s.ctx.db, late.body.transaction_id), (rows) => rows.length > 0);
      const rows = await s.ctx.db.query<{ event: string; payload: Record<string, any> }>('SELECT event, payload FROM outbox_events ORDER BY id');
      return rows.map(({ event, payload: p }) => ({
        event,
        status: p.status,
        amount: p.amount,
        payer: p.payer ?? p.payer_name ?? null,
        reason_code: p.reason_code ?? null,
        lifetime: p.expires_at && p.created_at ? secondsBetween(p.created_at, p.expires_at) : null,
        expired_on_time: p.expired_at ? p.expired_at === p.expires_at : null,
      }));
    } finally {
      await s.close();
    }
  }

  it('the same seed and the same advances give the same events', async () => {
    const first = await run();
    expect(first.map((e: any) => e.event)).toEqual(expect.arrayContaining(['pix.charge.created', 'pix.charge.paid', 'pix.charge.expired', 'pix.refund.failed']));
    // The payer is drawn from SIM_SEED's generator: the same on both runs.
    expect((first as any[]).find((e) => e.event === 'pix.charge.paid').payer).toEqual(expect.objectContaining({ name: expect.any(String) }));
    expect(await run()).toEqual(first);
  });
});
