import type { Logger } from 'pino';
import type { Config } from '../config.js';
import type { Database } from '../db/db.js';
import { isLockTimeout } from '../db/partitions.js';
import type { Clock } from '../lib/clock.js';
import type { BackgroundWorker } from '../lib/worker.js';
import { periodicWorker } from '../lib/periodic.js';
import { dropOldEventPartitions, ensureEventPartitions } from './partitions.js';
import * as repo from './repository.js';

const HOUR_MS = 3_600_000;
const DAY_MS = 24 * HOUR_MS;
/** Cash-out limit windows are kept this long after they started (a window lasts at most a day). */
const LIMIT_WINDOW_RETENTION_DAYS = 3;

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
  rail_inbox: number;
  events: number;
  sim_payments: number;
  limit_windows: number;
  nonces: number;
  /** Days of events (with their deliveries and attempts) whose partitions were dropped, YYYY-MM-DD. */
  event_days_dropped: string[];
}

/**
 * One retention pass: each table is purged by age in batches of RETENTION_BATCH_SIZE rows, and
 * each loops until a batch comes back short, so a pass removes everything past its window however
 * much ingress there was since the last one. Windows (RETENTION_* variables):
 *   idempotency records  RETENTION_IDEMPOTENCY_HOURS after their 24-hour window (default 0)
 *   rail_inbox ids       RETENTION_RAIL_INBOX_DAYS (default 7)
 *   outbox events, with their webhook deliveries and attempts, once every delivery is final
 *                        RETENTION_EVENT_DAYS (default 30)
 *   sim_payments         RETENTION_SIM_DAYS after settling or being rejected (default 100: past the
 *                        90-day return window and the MED window)
 *   cash-out limit windows  3 days after they started (a window lasts at most a day)
 *   signature-v2 nonces  once they expire (10 minutes after their claim: the timestamp check
 *                        refuses them from then on)
 * Outbox events, deliveries and attempts are partitioned by day (migration 0800): a pass first makes
 * the partitions of the coming days, then drops whole days past RETENTION_EVENT_DAYS with nothing
 * pending (src/retention/partitions.ts); the row purge takes what is left (the default partition,
 * final rows of a day kept for a pending delivery).
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
  await ensureEventPartitions(ctx.db).catch(busy);
  const dropped = (await dropOldEventPartitions(ctx.db, eventCutoff).catch(busy))?.dropped ?? [];
  return {
    event_days_dropped: dropped,
    idempotency_keys: await drain(() => repo.purgeIdempotencyKeys(ctx.db, new Date(now - r.idempotencyHours * HOUR_MS), r.batchSize)),
    rail_inbox: await drain(() => repo.purgeRailInbox(ctx.db, new Date(wallNow - r.railInboxDays * DAY_MS), r.batchSize)),
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
      first = ensureEventPartitions(ctx.db).then(
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
