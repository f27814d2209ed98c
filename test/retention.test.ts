import { describe, expect, it } from 'vitest';
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
        await db.query('INSERT INTO rail_inbox (notification_id, kind, processed_at) VALUES ($1, $2, $3)', [`n-old-${i}`, 'inbound.payment', old]);
        await db.query(`INSERT INTO outbox_events (event, subject, payload, created_at) VALUES ('webhook.test', $1, '{}', $2)`, [`s-old-${i}`, old]);
      }
      // Those are dispatched (fanned out: no longer waiting in outbox_pending); this one is not.
      expect(await db.query('DELETE FROM outbox_pending RETURNING id')).toHaveLength(10);
      await db.query('INSERT INTO rail_inbox (notification_id, kind) VALUES ($1, $2)', ['n-new', 'inbound.payment']);
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
          `INSERT INTO idempotency_keys (merchant_id, method, path, key, request_hash, status, owner_token, locked_until, response_status, response_body, expires_at)
           VALUES ($1, 'POST', '/pix/cash-out', $2, 'h', $3, gen_random_uuid(), now(), $4, $5, $6)`,
          [merchantId, key, status, status === 'completed' ? 200 : null, status === 'completed' ? '{}' : null, expiresAt],
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
