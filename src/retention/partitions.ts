import type { Database } from '../db/db.js';
import { type DailyPartitioned, dayStart, ensureDailyPartitions, listDailyPartitions, lockPartitions, partitionName } from '../db/partitions.js';

/**
 * The tables partitioned by day (migration 0800): an event, its deliveries and their attempts share
 * a partition key (the event's created_at), so one day of them lives in three partitions with the
 * same bounds, dropped together. Listed parent first; dropped children first.
 */
export const EVENT_PARTITIONS: readonly DailyPartitioned[] = [
  { table: 'outbox_events', key: 'created_at' },
  { table: 'webhook_deliveries', key: 'event_created_at' },
  { table: 'webhook_attempts', key: 'event_created_at' },
];

/**
 * The tables partitioned by day in migration 0910, each alone (nothing refers to their rows), each
 * by a time the row's message carries: signature-v2 nonces by the day of the signed timestamp, the
 * rail inbox by the day of the notification's own time, the stored answers of Idempotency-Keys by
 * the day their key expires.
 */
export const NONCE_PARTITIONS: DailyPartitioned = { table: 'request_nonces', key: 'signed_day' };
export const RAIL_INBOX_PARTITIONS: DailyPartitioned = { table: 'rail_inbox', key: 'notified_day' };
export const IDEMPOTENCY_PARTITIONS: DailyPartitioned = { table: 'idempotency_responses', key: 'expires_at' };

/** Every daily-partitioned table, in the order their partitions are made. */
export const DAILY_PARTITIONS: readonly DailyPartitioned[] = [...EVENT_PARTITIONS, NONCE_PARTITIONS, RAIL_INBOX_PARTITIONS, IDEMPOTENCY_PARTITIONS];

/** Daily partitions are made this many days ahead of today (a week of outage of every process). */
export const PARTITION_DAYS_AHEAD = 7;

const DAY_MS = 86_400_000;

/** Creates the partitions of today and the next PARTITION_DAYS_AHEAD days that are missing, of every daily-partitioned table. */
export async function ensurePartitions(db: Database, from?: Date): Promise<{ created: string[]; skipped: string[] }> {
  return ensureDailyPartitions(db, DAILY_PARTITIONS, { daysAhead: PARTITION_DAYS_AHEAD, ...(from ? { from } : {}) });
}

/**
 * Drops the daily partitions of `table` whose day ended at or before `cutoff`, each in its own
 * transaction under the partition lock (a pass that cannot lock the table within the lock_timeout
 * fails and the next pass tries again). For tables whose every row may go once its day is past the
 * cutoff (nothing pending in them). Returns the days dropped (YYYY-MM-DD).
 */
export async function dropOldPartitions(db: Database, { table }: DailyPartitioned, cutoff: Date): Promise<string[]> {
  const dropped: string[] = [];
  const days = (await listDailyPartitions(db, table)).filter((p) => p.day.getTime() + DAY_MS <= cutoff.getTime());
  for (const { name, day } of days) {
    const done = await db.transaction(async (tx) => {
      await lockPartitions(tx);
      const [present] = await tx.query<{ ok: boolean }>('SELECT to_regclass($1) IS NOT NULL AS ok', [name]);
      if (!present!.ok) return false; // another process dropped it meanwhile
      await tx.exec(`DROP TABLE ${name}`);
      return true;
    });
    if (done) dropped.push(day.toISOString().slice(0, 10));
  }
  return dropped;
}

/**
 * Drops the days of events that ended before `cutoff` whose every event is dispatched (no row in
 * outbox_pending) and every delivery final (none pending): the three partitions of the day in one
 * transaction, under the partition lock, after locking the three tables (nothing can write into the
 * day while it is checked and dropped; a pass that cannot take the locks within the lock_timeout
 * fails and the next pass tries again). A day that still holds pending work stays; its final rows
 * go by the row purge (src/retention/repository.ts purgeEvents), like those of the default
 * partition. Returns the days dropped (YYYY-MM-DD) and those kept for pending work.
 */
export async function dropOldEventPartitions(db: Database, cutoff: Date): Promise<{ dropped: string[]; kept: string[] }> {
  const dropped: string[] = [];
  const kept: string[] = [];
  const days = (await listDailyPartitions(db, 'outbox_events')).filter((p) => p.day.getTime() + DAY_MS <= cutoff.getTime());
  for (const { day } of days) {
    const label = day.toISOString().slice(0, 10);
    const done = await db.transaction(async (tx) => {
      await lockPartitions(tx);
      const [events, deliveries, attempts] = EVENT_PARTITIONS.map((p) => partitionName(p.table, dayStart(day)));
      const [present] = await tx.query<{ ok: boolean }>('SELECT to_regclass($1) IS NOT NULL AS ok', [events]);
      if (!present!.ok) return null; // another process dropped it meanwhile
      await tx.exec('LOCK TABLE outbox_events, webhook_deliveries, webhook_attempts IN ACCESS EXCLUSIVE MODE');
      const [busy] = await tx.query<{ busy: boolean }>(
        `SELECT EXISTS (SELECT 1 FROM outbox_pending p WHERE EXISTS (SELECT 1 FROM ${events} o WHERE o.id = p.id))
             OR EXISTS (SELECT 1 FROM ${deliveries} d WHERE d.status = 'pending') AS busy`,
      );
      if (busy!.busy) return false;
      await tx.exec(`DROP TABLE IF EXISTS ${attempts}; DROP TABLE IF EXISTS ${deliveries}; DROP TABLE ${events};`);
      return true;
    });
    if (done === true) dropped.push(label);
    else if (done === false) kept.push(label);
  }
  return { dropped, kept };
}
