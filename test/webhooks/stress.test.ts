import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { emitEvent } from '../../src/events/outbox.js';
import { webhookWorkers } from '../../src/webhooks/workers.js';
import { merchantWithKey } from '../helpers/client.js';
import { schemaAccess } from '../helpers/db.js';
import { startTestServer } from '../helpers/server.js';
import { startReceiver, waitUntil } from './helpers.js';

const pgUrl = process.env.TEST_DATABASE_URL;
const EVENTS = 1_000;
const SUBJECTS = 100;

describe.runIf(pgUrl)('two delivery workers over one PostgreSQL', () => {
  it(`deliver ${EVENTS} events with no duplicate and no loss, each subject in order`, async () => {
    const r = await startReceiver();
    // The server's own workers are off: the two worker sets below are the only senders.
    const s = await startTestServer({ backend: 'postgres', workers: false, env: { WEBHOOK_ALLOWED_HOSTS: r.hostPort } });
    const schema = (await s.ctx.db.query<{ schema: string }>('SELECT current_schema() AS schema'))[0]!.schema;
    const otherPool = await schemaAccess(schema).open({ max: 10 });
    const log = pino({ level: 'silent' });
    const workers = [
      ...webhookWorkers({ db: s.ctx.db, config: s.ctx.config, log }, { workerId: 'worker-a' }),
      ...webhookWorkers({ db: otherPool, config: s.ctx.config, log }, { workerId: 'worker-b' }),
    ];
    try {
      for (const w of workers) w.start();
      const fx = await merchantWithKey(s);
      const hook = await fx.client.post('/webhooks', { url: `${r.url}/stress`, events: ['pix.charge.paid'], allow_insecure: true });
      expect(hook.status).toBe(201);

      // Events arrive while both workers run: 100 subjects, 10 steps each, 50 per transaction.
      for (let batch = 0; batch < EVENTS / 50; batch++) {
        await s.ctx.db.transaction(async (tx) => {
          for (let i = 0; i < 50; i++) {
            const n = batch * 50 + i;
            const subject = `STRESS-${n % SUBJECTS}`;
            await emitEvent(tx, {
              event: 'pix.charge.paid',
              merchantId: fx.merchantId,
              accountId: fx.accountId,
              subject,
              payload: { status: 'paid', transaction_id: subject, n, step: Math.floor(n / SUBJECTS) },
            });
          }
        });
      }
      await r.waitFor((x) => x.length >= EVENTS, 60_000);
      await waitUntil(async () => (await s.ctx.db.query<any>(`SELECT count(*)::int AS n FROM webhook_deliveries WHERE status = 'delivered'`))[0].n === EVENTS, 30_000);

      // No duplicate: one request per delivery id and per event; no loss: every event arrived.
      expect(r.received).toHaveLength(EVENTS);
      expect(new Set(r.received.map((x) => x.headers['x-service-delivery'])).size).toBe(EVENTS);
      expect(new Set(r.received.map((x) => x.body.n))).toEqual(new Set(Array.from({ length: EVENTS }, (_, i) => i)));
      // Order per subject.
      const steps = new Map<string, number[]>();
      for (const x of r.received) steps.set(x.body.transaction_id, [...(steps.get(x.body.transaction_id) ?? []), x.body.step]);
      for (const [subject, seq] of steps) expect([subject, seq]).toEqual([subject, Array.from({ length: EVENTS / SUBJECTS }, (_, i) => i)]);
      // Both workers took part, and each delivery took one attempt.
      const byWorker = await s.ctx.db.query<{ worker: string; n: number }>(`SELECT worker, count(*)::int AS n FROM webhook_attempts GROUP BY worker ORDER BY worker`);
      expect(byWorker.map((w) => w.worker)).toEqual(['worker-a', 'worker-b']);
      expect(byWorker.reduce((a, w) => a + w.n, 0)).toBe(EVENTS);
    } finally {
      for (const w of workers) await w.stop();
      await otherPool.close();
      await s.close();
      await r.close();
    }
  }, 120_000);
});
