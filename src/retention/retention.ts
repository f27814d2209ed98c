import type { Logger } from 'pino';
import type { Config } from '../config.js';
import type { Database } from '../db/db.js';
import { isLockTimeout } from '../db/partitions.js';
import type { Clock } from '../lib/clock.js';
import type { BackgroundWorker } from '../lib/worker.js';
import { periodicWorker } from '../lib/periodic.js';
import { dropOldEventPartitions, dropOldPartitions, ensurePartitions, IDEMPOTENCY_PARTITIONS, NONCE_PARTITIONS, RAIL_INBOX_PARTITIONS } from './partitions.js';
import * as repo from './repository.js';

const HOUR_MS = 3_600_000;
const DAY_MS = 24 * HOUR_MS;
/** Cash-out limit windows are kept this long after they started (a window lasts at most a day). */
const LIMIT_WINDOW_RETENTION_DAYS = 3;
/**
 * A day of nonces is dropped this long after it ended: a request signed on that day passes the
 * timestamp check at most 300 s after midnight, and its record lives 600 s past its claim.
 */
export const NONCE_DAY_GRACE_MS = HOUR_MS;

/** What a retention pass uses (AppContext satisfies it). */
export interface RetentionDeps {
  db: Database;
  /** Business time: windows over rows stamped by it (idempotency keys, simulator payments, limit windows). */
  clock: Clock;
  /**
   * Real time (default `clock`): windows over rows the database stamps with its own now() or the
   * wall clock — outbox events and their daily partitions, the rail inbox, nonces. The sandbox clock
   * does not move them (docs/sandbox-clock.md).
   */
  wallClock?: Clock;
  config: Pick<Config, 'retention'>;
}

export interface RetentionReport {
  idempotency_keys: number;
  /** Answers of Idempotency-Keys deleted from the default partition. */
  idempotency_responses: number;
  rail_inbox: number;
  events: number;
  sim_payments: number;
  limit_windows: number;
  nonces: number;
  /** Days of events (with their deliveries and attempts) whose partitions were dropped, YYYY-MM-DD. */
  event_days_dropped: string[];
  /** Days of Idempotency-Key answers, of nonces and of rail inbox ids whose partitions were dropped. */
  idempotency_days_dropped: string[];
  nonce_days_dropped: string[];
  rail_inbox_days_dropped: string[];
}

/**
 * One retention pass: each table is purged by age in batches of RETENTION_BATCH_SIZE rows, and
 * each loops until a batch comes back short, so a pass removes everything past its window however
 * much ingress there was since the last one. Windows (RETENTION_* variables):
 *   idempotency records  RETENTION_IDEMPOTENCY_HOURS after their 24-hour window (default 0): the
 *                        key rows row by row, their answers by day of the key's expiry
 *   rail_inbox ids       RETENTION_RAIL_INBOX_DAYS (default 7), by day of the notification's time
 *   outbox events, with their webhook deliveries and attempts, once every delivery is final
 *                        RETENTION_EVENT_DAYS (default 30)
 *   sim_payments         RETENTION_SIM_DAYS after settling or being rejected (default 100: past the
 *                        90-day return window and the MED window)
 *   cash-out limit windows  3 days after they started (a window lasts at most a day)
 *   signature-v2 nonces  by day of their signed timestamp, an hour after that day ended (the
 *                        timestamp check refuses them from 300 s after it); expired ones in the
 *                        default partition row by row
 * Outbox events, deliveries and attempts are partitioned by day (migration 0800), and so are the
 * answers of Idempotency-Keys, the nonces and the rail inbox (0910): a pass first makes the
 * partitions of the coming days, then drops whole days — events past RETENTION_EVENT_DAYS with
 * nothing pending, answers whose every key is past its window, nonces whose day can no longer be
 * signed, inbox ids past RETENTION_RAIL_INBOX_DAYS (src/retention/partitions.ts); the row purges
 * take what is left (the default partitions, final rows of a day kept for a pending delivery, and
 * the small idempotency key rows, which are not partitioned).
 */
export async function runRetention(ctx: RetentionDeps): Promise<RetentionReport> {
  const r = ctx.config.retention;
  const now = ctx.clock.now().getTime();
  const wallNow = (ctx.wallClock ?? ctx.clock).now().getTime();
  const drain = async (purge: () => Promise<number>) => {
    let total = 0;
    for (;;) {
      const n = await purge();
      total += n;
      if (n < r.batchSize) return total;
    }
  };
  const eventCutoff = new Date(wallNow - r.eventDays * DAY_MS);
  // A partition step that found its tables busy (lock_timeout) waits for the next pass; the row
  // purges below run anyway.
  const busy = (err: unknown) => {
    if (isLockTimeout(err)) return null;
    throw err;
  };
  const idempotencyCutoff = new Date(now - r.idempotencyHours * HOUR_MS);
  // Never earlier than real time says: a sandbox advance must not drop the dedup of notifications
  // the rail may still redeliver (their days are the simulator's, so they are kept longer, not less).
  const railInboxCutoff = new Date(wallNow - r.railInboxDays * DAY_MS);
  await ensurePartitions(ctx.db).catch(busy);
  const dropped = (await dropOldEventPartitions(ctx.db, eventCutoff).catch(busy))?.dropped ?? [];
  const drop = async (p: Parameters<typeof dropOldPartitions>[1], cutoff: Date) => (await dropOldPartitions(ctx.db, p, cutoff).catch(busy)) ?? [];
  return {
    event_days_dropped: dropped,
    idempotency_days_dropped: await drop(IDEMPOTENCY_PARTITIONS, idempotencyCutoff),
    nonce_days_dropped: await drop(NONCE_PARTITIONS, new Date(wallNow - NONCE_DAY_GRACE_MS)),
    rail_inbox_days_dropped: await drop(RAIL_INBOX_PARTITIONS, railInboxCutoff),
    idempotency_keys: await drain(() => repo.purgeIdempotencyKeys(ctx.db, idempotencyCutoff, r.batchSize)),
    idempotency_responses: await drain(() => repo.purgeIdempotencyResponses(ctx.db, idempotencyCutoff, r.batchSize)),
    rail_inbox: await drain(() => repo.purgeRailInbox(ctx.db, railInboxCutoff, r.batchSize)),
    events: await drain(() => ctx.db.transaction((tx) => repo.purgeEvents(tx, eventCutoff, r.batchSize))),
    sim_payments: await drain(() => repo.purgeSimPayments(ctx.db, new Date(now - r.simDays * DAY_MS), r.batchSize)),
    limit_windows: await drain(() => repo.purgeLimitWindows(ctx.db, new Date(now - LIMIT_WINDOW_RETENTION_DAYS * DAY_MS), r.batchSize)),
    nonces: await drain(() => repo.purgeNonces(ctx.db, new Date(wallNow), r.batchSize)),
  };
}

/** The one retention worker: a pass every RETENTION_INTERVAL_MS. */
export function retentionWorker(ctx: RetentionDeps & { log: Logger }): BackgroundWorker {
  const loop = periodicWorker('retention', ctx.config.retention.intervalMs, ctx.log, async () => {
    const report = await runRetention(ctx);
    if (Object.values(report).some((n) => (Array.isArray(n) ? n.length > 0 : n > 0))) ctx.log.info({ retention: report }, 'retention pass');
  });
  let first: Promise<unknown> = Promise.resolve();
  return {
    ...loop,
    // The coming days' partitions at once, not only after the first interval.
    start() {
      first = ensurePartitions(ctx.db).then(
        (r) => r.created.length > 0 && ctx.log.info({ partitions: r.created }, 'partitions created'),
        (err) => ctx.log.error({ err }, 'creating partitions failed (the next retention pass tries again)'),
      );
      loop.start();
    },
    async stop() {
      await loop.stop();
      await first;
    },
  };
}
