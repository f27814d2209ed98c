import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import type { Database } from '../../src/db/db.js';
import { loadMigrations, migrate } from '../../src/db/migrate.js';
import { dayStart, partitionName } from '../../src/db/partitions.js';
import { DAILY_PARTITIONS, dropOldEventPartitions, ensurePartitions, EVENT_PARTITIONS, PARTITION_DAYS_AHEAD } from '../../src/retention/partitions.js';
import { runRetention } from '../../src/retention/retention.js';
import { dispatchOutbox, recordAttempts } from '../../src/webhooks/repository.js';
import { BACKENDS, openEmptyDatabase, openTestDatabase, secondHandle } from '../helpers/db.js';
import { DurableNonces } from '../../src/auth/nonceStore.js';
import { IdempotencyStore } from '../../src/external/idempotency.js';
import { recordNotification } from '../../src/pix/store/railInbox.js';
import { parseConfig } from '../../src/config.js';

/**
 * Issue 25 item 5: outbox events, webhook deliveries and attempts partitioned by day (migration 0800);
 * nonces, the rail inbox and the idempotency answers too (0910).
 */

const DAY_MS = 86_400_000;

async function whereIs(db: Database, table: string, where: string, params: unknown[]): Promise<string[]> {
  const rows = await db.query<{ t: string }>(`SELECT tableoid::regclass::text AS t FROM ${table} WHERE ${where}`, params);
  return rows.map((r) => r.t);
}

async function present(db: Database, name: string): Promise<boolean> {
  const [r] = await db.query<{ ok: boolean }>('SELECT to_regclass($1) IS NOT NULL AS ok', [name]);
  return r!.ok;
}

/** A merchant with one webhook subscribed to `test.event`. */
async function merchantWithWebhook(db: Database): Promise<{ merchantId: number; webhookId: string }> {
  const [m] = await db.query<{ id: number }>(`INSERT INTO merchants (name, document) VALUES ('M', '12345678901') RETURNING id`);
  const webhookId = randomUUID();
  await db.query(`INSERT INTO webhooks (id, merchant_id, url, events, secret) VALUES ($1, $2, 'https://example.com/h', '{test.event}', $3)`, [
    webhookId,
    m!.id,
    'secret-0123456789abcdef',
  ]);
  return { merchantId: m!.id, webhookId };
}

/** An event at `at`, fanned out, its delivery attempted once with `outcome`. */
async function deliveredEvent(db: Database, merchantId: number, at: Date, outcome: 'delivered' | 'retry'): Promise<{ outboxId: number; deliveryId: string }> {
  const [e] = await db.query<{ id: number }>(
    `INSERT INTO outbox_events (event, merchant_id, subject, payload, created_at) VALUES ('test.event', $1, $2, '{}', $3) RETURNING id`,
    [merchantId, `s-${randomUUID()}`, at],
  );
  await dispatchOutbox(db, 100, []);
  const token = randomUUID();
  const [d] = await db.query<{ id: string; key: string }>(
    `UPDATE webhook_deliveries SET claim_token = $2, attempts = 1 WHERE outbox_id = $1 RETURNING id, event_created_at::text AS key`,
    [e!.id, token],
  );
  const attempt = { deliveryId: d!.id, claimToken: token, attempt: 1, worker: 'w', startedAt: new Date(), durationMs: 1, statusCode: 200, error: null, responseBody: 'ok', partitionKey: d!.key };
  const changed = await recordAttempts(db, [{ attempt, outcome: outcome === 'delivered' ? { kind: 'delivered' } : { kind: 'retry', delayMs: 60_000 } }]);
  expect(changed.has(d!.id)).toBe(true);
  return { outboxId: e!.id, deliveryId: d!.id };
}

describe.each(BACKENDS)('daily partitions (outbox, nonces, rail inbox, idempotency answers) on %s', (backend) => {
  it('migration 0800 turns the three tables into partitioned ones, moving rows with their ids and every reference', async () => {
    const t = await openEmptyDatabase(backend);
    try {
      const all = loadMigrations();
      await migrate(t.db, all.filter((m) => m.name < '0800'));
      const { merchantId, webhookId } = await merchantWithWebhook(t.db);
      const at = new Date(Date.now() - 3 * DAY_MS);
      await t.db.query(`INSERT INTO outbox_events (event, merchant_id, subject, payload, created_at) VALUES ('test.event', $1, 'a', '{"n":1}', $2)`, [merchantId, at]);
      await t.db.query(`INSERT INTO outbox_events (event, merchant_id, subject, payload) VALUES ('test.event', $1, 'b', '{"n":2}')`, [merchantId]);
      await t.db.query(`DELETE FROM outbox_pending WHERE id = (SELECT min(id) FROM outbox_events)`);
      await t.db.query(
        `INSERT INTO webhook_deliveries (webhook_id, outbox_id, event, subject, status) SELECT $1, id, event, subject, 'delivered' FROM outbox_events WHERE subject = 'a'`,
        [webhookId],
      );
      await t.db.query(`INSERT INTO webhook_attempts (delivery_id, attempt, worker, started_at, duration_ms) SELECT id, 1, 'w', now(), 5 FROM webhook_deliveries`);
      const before = await t.db.query<{ id: number; event_id: string }>('SELECT id, event_id FROM outbox_events ORDER BY id');

      expect(await migrate(t.db)).toEqual(all.filter((m) => m.name >= '0800').map((m) => m.name));

      const kinds = await t.db.query<{ relname: string; strat: string }>(
        `SELECT c.relname, p.partstrat AS strat FROM pg_partitioned_table p JOIN pg_class c ON c.oid = p.partrelid
          WHERE c.relnamespace = current_schema()::regnamespace ORDER BY c.relname`,
      );
      // (with those of migration 0910: test/db/partitions-0910.test.ts)
      expect(kinds).toEqual(
        ['idempotency_responses', 'outbox_events', 'rail_inbox', 'request_nonces', 'webhook_attempts', 'webhook_deliveries'].map((relname) => ({ relname, strat: 'r' })),
      );
      expect(await t.db.query('SELECT id, event_id FROM outbox_events ORDER BY id')).toEqual(before);
      const [d] = await t.db.query<{ event_created_at: Date; status: string }>('SELECT event_created_at, status FROM webhook_deliveries');
      expect(d).toEqual({ event_created_at: at, status: 'delivered' });
      const [a] = await t.db.query<{ event_created_at: Date }>('SELECT event_created_at FROM webhook_attempts');
      expect(a!.event_created_at).toEqual(at);
      // The event not fanned out still waits; new ids continue after the moved ones; the triggers came along.
      expect((await t.db.query<{ id: number }>('SELECT id FROM outbox_pending')).map((r) => r.id)).toEqual([before[1]!.id]);
      const [n] = await t.db.query<{ id: number }>(`INSERT INTO outbox_events (event, merchant_id, subject, payload) VALUES ('test.event', $1, 'c', '{}') RETURNING id`, [merchantId]);
      expect(n!.id).toBeGreaterThan(before[1]!.id);
      expect((await t.db.query<{ id: number }>('SELECT id FROM outbox_pending ORDER BY id')).map((r) => r.id)).toEqual([before[1]!.id, n!.id]);
      await expect(t.db.query(`INSERT INTO outbox_events (event, merchant_id, subject, payload) VALUES ('test.event', 999999, 'x', '{}')`)).rejects.toMatchObject({
        code: '23503',
      });
      // Uniqueness kept where it matters: one delivery per (webhook, event), one row per attempt number.
      await expect(
        t.db.query(`INSERT INTO webhook_deliveries (webhook_id, outbox_id, event, subject, event_created_at) SELECT webhook_id, outbox_id, event, subject, event_created_at FROM webhook_deliveries`),
      ).rejects.toMatchObject({ code: '23505' });
    } finally {
      await t.close();
    }
  }, 180_000); // every migration from an empty database, on a loaded machine

  it('creates today and the coming days ahead once, however often and by how many processes at once', async () => {
    const t = await openTestDatabase(backend);
    const b = await secondHandle(t);
    try {
      const runs = await Promise.all([ensurePartitions(t.db), ensurePartitions(b.db), ensurePartitions(t.db)]);
      const created = runs.flatMap((r) => r.created).sort();
      const [{ now }] = (await t.db.query<{ now: Date }>('SELECT now() AS now')) as [{ now: Date }];
      const expected = DAILY_PARTITIONS.flatMap((p) =>
        Array.from({ length: PARTITION_DAYS_AHEAD + 1 }, (_, i) => partitionName(p.table, new Date(dayStart(now).getTime() + i * DAY_MS))),
      ).sort();
      expect(created).toEqual(expected);
      expect(await ensurePartitions(t.db)).toEqual({ created: [], skipped: [] });
      for (const name of expected) expect(await present(t.db, name)).toBe(true);
    } finally {
      if (b !== t) await b.close();
      await t.close();
    }
  });

  it('routes an event, its delivery and its attempts to the partitions of the event day; the default takes uncovered days', async () => {
    const t = await openTestDatabase(backend);
    try {
      const { merchantId } = await merchantWithWebhook(t.db);
      const [{ now }] = (await t.db.query<{ now: Date }>('SELECT now() AS now')) as [{ now: Date }];
      await ensurePartitions(t.db);
      const today = dayStart(now);
      const e = await deliveredEvent(t.db, merchantId, now, 'delivered');
      expect(await whereIs(t.db, 'outbox_events', 'id = $1', [e.outboxId])).toEqual([partitionName('outbox_events', today)]);
      expect(await whereIs(t.db, 'webhook_deliveries', 'id = $1', [e.deliveryId])).toEqual([partitionName('webhook_deliveries', today)]);
      expect(await whereIs(t.db, 'webhook_attempts', 'delivery_id = $1', [e.deliveryId])).toEqual([partitionName('webhook_attempts', today)]);
      const old = await deliveredEvent(t.db, merchantId, new Date(now.getTime() - 100 * DAY_MS), 'delivered');
      expect(await whereIs(t.db, 'outbox_events', 'id = $1', [old.outboxId])).toEqual(['outbox_events_default']);
      expect(await whereIs(t.db, 'webhook_attempts', 'delivery_id = $1', [old.deliveryId])).toEqual(['webhook_attempts_default']);
      // A day whose rows already sit in the default partition is left to it (its partition could not take them).
      const stranded = new Date(now.getTime() - 100 * DAY_MS);
      expect(await ensurePartitions(t.db, stranded)).toMatchObject({ skipped: EVENT_PARTITIONS.map((p) => partitionName(p.table, dayStart(stranded))) });
    } finally {
      await t.close();
    }
  });

  it('routes a nonce to its signed day, a rail notification to its own day and an idempotency answer to its key\'s expiry day', async () => {
    const t = await openTestDatabase(backend);
    try {
      const [{ now }] = (await t.db.query<{ now: Date }>('SELECT now() AS now')) as [{ now: Date }];
      await ensurePartitions(t.db, new Date(now.getTime() - 2 * DAY_MS));
      const day = (offset: number) => new Date(dayStart(now).getTime() + offset * DAY_MS);
      // A nonce claimed now but signed yesterday (a request at 00:00:10 signed at 23:59:55) goes to yesterday.
      const nonces = new DurableNonces(t.db, { now: () => now });
      expect((await nonces.claim('cli', 'partition-nonce-0001', 'f', 600, new Date(day(0).getTime() - 5_000))).claim).toBe('claimed');
      expect(await whereIs(t.db, 'request_nonces', `nonce = 'partition-nonce-0001'`, [])).toEqual([partitionName('request_nonces', day(-1))]);
      // A notification of yesterday applied today: yesterday's partition; its redelivery is recognised there.
      const at = new Date(day(0).getTime() - 60_000);
      expect(await t.db.transaction((tx) => recordNotification(tx, 'n-partition-1', 'payment.accepted', at))).toBe(true);
      expect(await t.db.transaction((tx) => recordNotification(tx, 'n-partition-1', 'payment.accepted', at))).toBe(false);
      expect(await whereIs(t.db, 'rail_inbox', `notification_id = 'n-partition-1'`, [])).toEqual([partitionName('rail_inbox', day(-1))]);
      // An answer: the day its key expires (tomorrow or the day after, 24 h from now), the key row whole.
      const [m] = await t.db.query<{ id: number }>(`INSERT INTO merchants (name, document) VALUES ('M', '12345678901') RETURNING id`);
      const store = new IdempotencyStore(t.db, { now: () => now });
      const scope = { merchantId: m!.id, method: 'POST', path: '/x', key: 'partition-key-1' };
      const claimed = await store.claim(scope, 'h');
      if (claimed.kind !== 'claimed') throw new Error('expected a claim');
      await store.complete(claimed.claim, { statusCode: 201, body: '{"n":1}' });
      const expires = new Date(now.getTime() + 86_400_000);
      expect(await whereIs(t.db, 'idempotency_responses', 'key_id = $1', [claimed.claim.id])).toEqual([partitionName('idempotency_responses', dayStart(expires))]);
      expect(await store.claim(scope, 'h')).toEqual({ kind: 'replay', answer: { statusCode: 201, body: '{"n":1}' } });
    } finally {
      await t.close();
    }
  });

  it('retention drops a whole day past the window when nothing in it is pending, keeps a day with a pending delivery, and rows in the window', async () => {
    const t = await openTestDatabase(backend);
    try {
      const { merchantId } = await merchantWithWebhook(t.db);
      const [{ now }] = (await t.db.query<{ now: Date }>('SELECT now() AS now')) as [{ now: Date }];
      const config = parseConfig({ RETENTION_EVENT_DAYS: '30' });
      const oldDay = new Date(dayStart(now).getTime() - 40 * DAY_MS);
      const busyDay = new Date(dayStart(now).getTime() - 35 * DAY_MS);
      await ensurePartitions(t.db, oldDay);
      await ensurePartitions(t.db, busyDay);
      const gone = [await deliveredEvent(t.db, merchantId, new Date(oldDay.getTime() + 3_600_000), 'delivered'), await deliveredEvent(t.db, merchantId, new Date(oldDay.getTime() + 7_200_000), 'delivered')];
      const waiting = await deliveredEvent(t.db, merchantId, new Date(busyDay.getTime() + 3_600_000), 'retry');
      const recent = await deliveredEvent(t.db, merchantId, new Date(now.getTime() - 2 * DAY_MS), 'delivered');

      const report = await runRetention({ db: t.db, clock: { now: () => now }, config });
      // Every empty day made ahead of oldDay and busyDay past the window went too; busyDay stayed.
      const cutoff = now.getTime() - 30 * DAY_MS;
      expect(report.event_days_dropped).toContain(oldDay.toISOString().slice(0, 10));
      expect(report.event_days_dropped).not.toContain(busyDay.toISOString().slice(0, 10));
      for (const day of report.event_days_dropped) expect(new Date(`${day}T00:00:00Z`).getTime() + DAY_MS).toBeLessThanOrEqual(cutoff);
      for (const p of EVENT_PARTITIONS) {
        expect(await present(t.db, partitionName(p.table, oldDay))).toBe(false);
        expect(await present(t.db, partitionName(p.table, busyDay))).toBe(true);
      }
      const ids = (await t.db.query<{ id: number }>('SELECT id FROM outbox_events ORDER BY id')).map((r) => r.id);
      expect(ids).toEqual([waiting.outboxId, recent.outboxId]);
      expect(ids).not.toContain(gone[0]!.outboxId);
      expect((await t.db.query<{ id: string }>('SELECT id FROM webhook_deliveries ORDER BY outbox_id')).map((r) => r.id)).toEqual([waiting.deliveryId, recent.deliveryId]);
      expect(await t.db.query('SELECT count(*)::int AS n FROM webhook_attempts')).toEqual([{ n: 2 }]);
      // Once the day's last delivery is final, the next pass drops it too.
      await t.db.query(`UPDATE webhook_deliveries SET status = 'failed' WHERE id = $1`, [waiting.deliveryId]);
      expect(await dropOldEventPartitions(t.db, new Date(now.getTime() - 30 * DAY_MS))).toEqual({ dropped: [busyDay.toISOString().slice(0, 10)], kept: [] });
      expect((await t.db.query<{ id: number }>('SELECT id FROM outbox_events')).map((r) => r.id)).toEqual([recent.outboxId]);
    } finally {
      await t.close();
    }
  });

  it.runIf(backend === 'postgres')('a pass that finds the outbox busy leaves partitions to the next pass and still purges rows', async () => {
    const t = await openTestDatabase(backend);
    const b = await secondHandle(t);
    try {
      const config = parseConfig({});
      const { merchantId } = await merchantWithWebhook(t.db);
      await deliveredEvent(t.db, merchantId, new Date(Date.now() - 100 * DAY_MS), 'delivered');
      // Another process reads the outbox in a long transaction (ACCESS SHARE, what a SELECT takes):
      // creating a partition must wait for it; deleting rows need not.
      const report = await b.db.transaction(async (tx) => {
        await tx.query('LOCK TABLE outbox_events IN ACCESS SHARE MODE');
        return runRetention({ db: t.db, clock: { now: () => new Date() }, config });
      });
      expect(report.events).toBe(1); // the row purge ran
      expect(await t.db.query(`SELECT relname FROM pg_class WHERE relname ~ '^outbox_events_p[0-9]{8}$' AND relnamespace = current_schema()::regnamespace`)).toEqual([]);
      expect((await ensurePartitions(t.db)).created).toHaveLength(DAILY_PARTITIONS.length * (PARTITION_DAYS_AHEAD + 1));
    } finally {
      await b.close();
      await t.close();
    }
  });

  it('partitions nonces, the rail inbox and the idempotency answers too; keeps the idempotency keys and the audit log whole', async () => {
    const t = await openTestDatabase(backend);
    try {
      const rows = await t.db.query<{ relname: string; relkind: string }>(
        `SELECT relname, relkind::text FROM pg_class WHERE relnamespace = current_schema()::regnamespace
           AND relname IN ('idempotency_keys', 'idempotency_responses', 'request_nonces', 'rail_inbox', 'admin_audit_log') ORDER BY relname`,
      );
      expect(rows).toEqual([
        { relname: 'admin_audit_log', relkind: 'r' },
        { relname: 'idempotency_keys', relkind: 'r' },
        { relname: 'idempotency_responses', relkind: 'p' },
        { relname: 'rail_inbox', relkind: 'p' },
        { relname: 'request_nonces', relkind: 'p' },
      ]);
    } finally {
      await t.close();
    }
  });
});
