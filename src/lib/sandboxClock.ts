import type { Database, Sql } from '../db/db.js';
import { notify } from '../db/db.js';
import type { Clock } from './clock.js';

/**
 * The business clock of the sandbox (issue 28, docs/sandbox-clock.md): real time plus an offset
 * that only grows, kept in the one-row table `sandbox_clock` (migration 1400) so that every process
 * of an installation runs on the same simulated time. Each process reads the row at start and
 * follows the `sandbox_clock` notification (its payload is the new offset in seconds; a `null` —
 * notifications may have been missed — reads the row again), so `now()` stays synchronous and
 * costs nothing. SQL that compares business deadlines uses `business_now()`, which reads the row in
 * its own snapshot. Security windows (signature timestamps, nonces, key lifetimes, sessions, rate
 * limits) do not use this clock: they take the wall clock (`AppContext.wallClock`).
 */
export const CLOCK_CHANNEL = 'sandbox_clock';

/** The largest single advance: 366 days (a year of deadlines in one step; more is a typo). */
export const MAX_ADVANCE_SECONDS = 366 * 86_400;
/** The largest total offset: 10 years (beyond it dates leave the range the domains were written for). */
export const MAX_OFFSET_SECONDS = 10 * 366 * 86_400;

export class SandboxClock implements Clock {
  readonly realTime: boolean;
  private offsetMs = 0;
  private readonly listeners = new Set<(offsetSeconds: number) => void>();
  private unlisten: (() => Promise<void>) | undefined;

  constructor(private readonly base: Clock) {
    this.realTime = base.realTime === true;
  }

  now(): Date {
    return new Date(this.base.now().getTime() + this.offsetMs);
  }

  /** The wall clock this one runs ahead of. */
  wall(): Clock {
    return this.base;
  }

  offsetSeconds(): number {
    return this.offsetMs / 1000;
  }

  /**
   * Takes a newer offset (from the table or a notification). Offsets only grow: an older one (a
   * notification overtaken by a read) is ignored. Calls the `onAdvance` handlers when it moved.
   */
  apply(offsetSeconds: number): void {
    if (!Number.isSafeInteger(offsetSeconds) || offsetSeconds * 1000 <= this.offsetMs) return;
    this.offsetMs = offsetSeconds * 1000;
    for (const fn of this.listeners) {
      try {
        fn(offsetSeconds);
      } catch {
        // a handler's failure is its own
      }
    }
  }

  /** Called after every advance this process learns of (to wake what sleeps until a deadline). */
  onAdvance(fn: (offsetSeconds: number) => void): () => void {
    this.listeners.add(fn);
    return () => this.listeners.delete(fn);
  }

  /** Reads the offset from the database and takes it. */
  async load(db: Sql): Promise<number> {
    const offset = await readOffset(db);
    this.apply(offset);
    return offset;
  }

  /** Reads the offset, then follows the notifications of every process's advances. */
  async follow(db: Database): Promise<void> {
    if (this.unlisten) return;
    this.unlisten = await db.listen(CLOCK_CHANNEL, (payload) => {
      const n = payload === null ? NaN : Number(payload);
      if (Number.isSafeInteger(n)) this.apply(n);
      else void this.load(db).catch(() => {});
    });
    await this.load(db);
  }

  async close(): Promise<void> {
    const off = this.unlisten;
    this.unlisten = undefined;
    await off?.();
  }
}

/** The stored offset in seconds (0 before migration 1400's row exists). */
export async function readOffset(db: Sql): Promise<number> {
  const [row] = await db.query<{ offset_seconds: number }>('SELECT offset_seconds FROM sandbox_clock');
  return row?.offset_seconds ?? 0;
}

/**
 * Moves business time forward by `seconds` for the whole installation: one UPDATE, and the
 * notification (sent at commit) that every process's clock follows. Answers the new offset, or
 * null when it would pass MAX_OFFSET_SECONDS (nothing changed).
 */
export async function advanceOffset(db: Database, seconds: number): Promise<number | null> {
  return db.transaction(async (tx) => {
    const [row] = await tx.query<{ offset_seconds: number }>(
      `UPDATE sandbox_clock SET offset_seconds = offset_seconds + $1, updated_at = now()
        WHERE offset_seconds + $1 <= $2 RETURNING offset_seconds`,
      [seconds, MAX_OFFSET_SECONDS],
    );
    if (!row) return null;
    await tx.query('INSERT INTO sandbox_clock_history (since, offset_seconds) VALUES (now(), $1)', [row.offset_seconds]);
    await notify(tx, CLOCK_CHANNEL, String(row.offset_seconds));
    return row.offset_seconds;
  });
}

/**
 * SQL for the simulated time of `column`, a time the database stamped with its own now() (real
 * time): the column plus the offset that held then (`sandbox_clock_history`; none: 0). For reads
 * of such rows — the events feed's `created_at` — so that writes pay nothing.
 */
export function simulatedAt(column: string): string {
  if (!/^[a-z_][a-z0-9_.]*$/.test(column)) throw new Error(`not a column: ${column}`);
  return `(${column} + COALESCE((SELECT h.offset_seconds FROM sandbox_clock_history h WHERE h.since <= ${column} ORDER BY h.since DESC LIMIT 1), 0) * interval '1 second')`;
}
