import { describe, expect, it } from 'vitest';
import { dayStart, partitionName } from '../src/db/partitions.js';
import { ensurePartitions } from '../src/retention/partitions.js';
import { runRetention } from '../src/retention/retention.js';
import { BACKENDS } from './helpers/db.js';
import { startTestServer } from './helpers/server.js';

/** Issue 10: the retention worker purges by age, in batches until done, never what is still needed. */
describe.each(BACKENDS)('retention on %s', (backend) => {
  it('purges old rail_inbox ids and final old events in batches until done; keeps undispatched events', async () => {
    const s = await startTestServer({ backend, workers: false, env: { RETENTION_BATCH_SIZE: '3' } });
    try {
      const db = s.ctx.db;
      const old = new Date(Date.now() - 40 * 86_400_000);
      for (let i = 0; i < 10; i++) {
        // A day with no partition: the default partition's rows go by the row purge.
        await db.query('INSERT INTO rail_inbox (notification_id, kind, processed_at, notified_day) VALUES ($1, $2, $3, $4)', [`n-old-${i}`, 'inbound.payment', old, dayStart(old)]);
        await db.query(`INSERT INTO outbox_events (event, subject, payload, created_at) VALUES ('webhook.test', $1, '{}', $2)`, [`s-old-${i}`, old]);
      }
      // Those are dispatched (fanned out: no longer waiting in outbox_pending); this one is not.
      expect(await db.query('DELETE FROM outbox_pending RETURNING id')).toHaveLength(10);
      await db.query('INSERT INTO rail_inbox (notification_id, kind, notified_day) VALUES ($1, $2, $3)', ['n-new', 'inbound.payment', dayStart(new Date())]);
      await db.query(`INSERT INTO outbox_events (event, subject, payload, created_at) VALUES ('webhook.test', 's-undispatched', '{}', $1)`, [old]);
      const clock = { now: () => new Date() };
      const report = await runRetention({ db, clock, config: s.ctx.config });
      expect(report).toMatchObject({ rail_inbox: 10, events: 10 });
      expect((await db.query('SELECT notification_id FROM rail_inbox')).map((r: any) => r.notification_id)).toEqual(['n-new']);
      expect((await db.query('SELECT subject FROM outbox_events')).map((r: any) => r.subject)).toEqual(['s-undispatched']);
    } finally {
      await s.close();
    }
  });

  it('purges completed idempotency records past their window, never in-progress claims or live windows', async () => {
    const s = await startTestServer({ backend, workers: false, env: { RETENTION_BATCH_SIZE: '2' } });
    try {
      const db = s.ctx.db;
      const merchantId = (await db.query<{ id: number }>(`INSERT INTO merchants (name, document) VALUES ('Retention', '11444777000161') RETURNING id`))[0]!.id;
      const hour = 3_600_000;
      const insert = (key: string, status: 'completed' | 'in_progress', expiresAt: Date) =>
        db.query(
          `WITH k AS (
             INSERT INTO idempotency_keys (merchant_id, method, path, key, request_hash, status, owner_token, locked_until, response_status, expires_at)
             VALUES ($1, 'POST', '/pix/cash-out', $2, 'h', $3, gen_random_uuid(), now(), $4, $5) RETURNING id, expires_at, status)
           INSERT INTO idempotency_responses (key_id, expires_at, body) SELECT id, expires_at, '{}' FROM k WHERE status = 'completed'`,
          [merchantId, key, status, status === 'completed' ? 200 : null, expiresAt],
        );
      for (let i = 0; i < 5; i++) await insert(`expired-${i}`, 'completed', new Date(Date.now() - 2 * hour));
      await insert('expired-but-claimed', 'in_progress', new Date(Date.now() - 2 * hour));
      await insert('live', 'completed', new Date(Date.now() + 20 * hour));
      const report = await runRetention({ db, clock: { now: () => new Date() }, config: s.ctx.config });
      expect(report.idempotency_keys).toBe(5);
      expect((await db.query<{ key: string }>('SELECT key FROM idempotency_keys ORDER BY key')).map((r) => r.key)).toEqual(['expired-but-claimed', 'live']);
    } finally {
      await s.close();
    }
  });

  it('drops whole days of idempotency answers, nonces and rail inbox ids past their windows; keeps the days still in them', async () => {
    const s = await startTestServer({ backend, workers: false });
    try {
      const db = s.ctx.db;
      const day = 86_400_000;
      const now = new Date();
      const today = dayStart(now);
      const merchantId = (await db.query<{ id: number }>(`INSERT INTO merchants (name, document) VALUES ('Retention', '11444777000161') RETURNING id`))[0]!.id;
      // Partitions of days past every window (10 days ago: rail inbox 7 days; answers: their keys
      // expired; nonces: the day can no longer be signed) and of yesterday (a nonce day still in
      // its grace while the clock is within an hour of midnight, otherwise past it).
      const old = new Date(today.getTime() - 10 * day);
      await ensurePartitions(db, old);
      const answer = (key: string, expiresAt: Date) =>
        db.query(
          `WITH k AS (
             INSERT INTO idempotency_keys (merchant_id, method, path, key, request_hash, status, owner_token, locked_until, response_status, expires_at)
             VALUES ($1, 'POST', '/pix/cash-out', $2, 'h', 'completed', gen_random_uuid(), now(), 200, $3) RETURNING id, expires_at)
           INSERT INTO idempotency_responses (key_id, expires_at, body) SELECT id, expires_at, '{"kept":"bytes"}' FROM k`,
          [merchantId, key, expiresAt],
        );
      await answer('old', new Date(old.getTime() + 3_600_000));
      await answer('live', new Date(now.getTime() + 20 * 3_600_000));
      const nonce = (n: string, signedAt: Date) =>
        db.query(`INSERT INTO request_nonces (client_id, nonce, fingerprint, expires_at, signed_day) VALUES ('cli', $1, 'f', $2, $3)`, [n, new Date(signedAt.getTime() + 600_000), dayStart(signedAt)]);
      await nonce('nonce-of-an-old-day-1', new Date(old.getTime() + 3_600_000));
      await nonce('nonce-of-today-000001', now);
      const inbox = (id: string, at: Date) => db.query('INSERT INTO rail_inbox (notification_id, kind, processed_at, notified_day) VALUES ($1, $2, $3, $4)', [id, 'inbound.payment', at, dayStart(at)]);
      await inbox('n-old', new Date(old.getTime() + 3_600_000));
      await inbox('n-today', now);
      const where = async (table: string) => (await db.query<{ t: string }>(`SELECT tableoid::regclass::text AS t FROM ${table}`)).map((r) => r.t).sort();
      expect(await where('rail_inbox')).toEqual([partitionName('rail_inbox', old), partitionName('rail_inbox', today)].sort());

      const report = await runRetention({ db, clock: { now: () => now }, config: s.ctx.config });
      const label = old.toISOString().slice(0, 10);
      expect(report.idempotency_days_dropped).toContain(label);
      expect(report.nonce_days_dropped).toContain(label);
      expect(report.rail_inbox_days_dropped).toContain(label);
      for (const days of [report.idempotency_days_dropped, report.nonce_days_dropped, report.rail_inbox_days_dropped]) {
        expect(days).not.toContain(today.toISOString().slice(0, 10));
      }
      // Whole partitions went, no row was deleted from a kept day.
      expect(report).toMatchObject({ rail_inbox: 0, nonces: 0, idempotency_responses: 0 });
      for (const table of ['idempotency_responses', 'request_nonces', 'rail_inbox']) {
        const [r] = await db.query<{ ok: boolean }>('SELECT to_regclass($1) IS NOT NULL AS ok', [partitionName(table, old)]);
        expect(r!.ok, table).toBe(false);
      }
      expect(await where('rail_inbox')).toEqual([partitionName('rail_inbox', today)]);
      expect((await db.query<{ nonce: string }>('SELECT nonce FROM request_nonces')).map((r) => r.nonce)).toEqual(['nonce-of-today-000001']);
      // The expired key row is deleted (its answer went with its day); the live key still replays its bytes.
      expect((await db.query<{ key: string }>('SELECT key FROM idempotency_keys ORDER BY key')).map((r) => r.key)).toEqual(['live']);
      expect(await db.query('SELECT body FROM idempotency_responses')).toEqual([{ body: '{"kept":"bytes"}' }]);
    } finally {
      await s.close();
    }
  });

  it('purges final simulated payments past RETENTION_SIM_DAYS, keeping in-flight ones and those an infraction refers to', async () => {
    const s = await startTestServer({ backend, workers: false, env: { RETENTION_BATCH_SIZE: '2' } });
    try {
      const db = s.ctx.db;
      const day = 86_400_000;
      const old = new Date(Date.now() - 120 * day);
      const recent = new Date(Date.now() - 10 * day);
      const insert = (e2e: string, status: string, resolvedAt: Date | null) =>
        db.query(
          `INSERT INTO sim_payments (end_to_end_id, kind, direction, amount, payer_ispb, receiver_ispb, status, created_at, resolved_at)
           VALUES ($1, 'payment', 'outbound', 100, '00000000', '18236120', $2, $3, $4)`,
          [e2e, status, old, resolvedAt],
        );
      for (let i = 0; i < 5; i++) await insert(`E-old-settled-${i}`, i % 2 ? 'rejected' : 'settled', old);
      await insert('E-recent-settled', 'settled', recent);
      await insert('E-old-in-flight', 'in_flight', null);
      await insert('E-old-held', 'held', null);
      await insert('E-old-disputed', 'settled', old);
      await db.query(`INSERT INTO sim_infractions (id, end_to_end_id, amount, reason, status, created_at) VALUES (gen_random_uuid(), 'E-old-disputed', 100, 'fraud', 'CLOSED', $1)`, [old]);
      const report = await runRetention({ db, clock: { now: () => new Date() }, config: s.ctx.config });
      expect(report.sim_payments).toBe(5);
      expect((await db.query<{ e: string }>('SELECT end_to_end_id AS e FROM sim_payments ORDER BY 1')).map((r) => r.e)).toEqual([
        'E-old-disputed',
        'E-old-held',
        'E-old-in-flight',
        'E-recent-settled',
      ]);
    } finally {
      await s.close();
    }
  });

  it('purges cash-out limit windows that started more than 3 days ago (the only purge of them)', async () => {
    const s = await startTestServer({ backend, workers: false, env: { RETENTION_BATCH_SIZE: '2' } });
    try {
      const db = s.ctx.db;
      const merchantId = (await db.query<{ id: number }>(`INSERT INTO merchants (name, document) VALUES ('Windows', '11444777000161') RETURNING id`))[0]!.id;
      const accountId = (await db.query<{ id: number }>('INSERT INTO accounts (merchant_id) VALUES ($1) RETURNING id', [merchantId]))[0]!.id;
      const day = 86_400_000;
      for (const [kind, ago] of [['day', 5], ['night', 5], ['day', 4], ['day', 1], ['night', 0]] as const) {
        await db.query('INSERT INTO cash_out_usage (account_id, window_kind, window_start, amount) VALUES ($1, $2, $3, 100)', [accountId, kind, new Date(Date.now() - ago * day)]);
      }
      const report = await runRetention({ db, clock: { now: () => new Date() }, config: s.ctx.config });
      expect(report.limit_windows).toBe(3);
      expect(await db.query('SELECT count(*)::int AS n FROM cash_out_usage')).toEqual([{ n: 2 }]);
    } finally {
      await s.close();
    }
  });
});
