/** Time source; tests and the simulator inject their own. */
export interface Clock {
  now(): Date;
  /**
   * True when the clock moves with real time (the system's, or the system's plus the sandbox
   * offset, src/lib/sandboxClock.ts): a worker may sleep in real time until a deadline read on it.
   * A clock tests move by hand leaves it unset, and workers poll instead.
   */
  readonly realTime?: boolean;
}

export const systemClock: Clock = { now: () => new Date(), realTime: true };

/** Whether a real-time sleep until a deadline of `clock` means something (see `Clock.realTime`). */
export function runsInRealTime(clock: Clock): boolean {
  return clock.realTime === true;
}

/** ISO 8601 UTC with trailing Z (`2026-11-21T10:00:00.000Z`), or null. */
export function isoZ(date: Date | null | undefined): string | null {
  return date ? date.toISOString() : null;
}

/** ISO 8601 UTC without zone designator ("naive"), as the webhook list form shows dates. */
export function isoNaive(date: Date): string {
  return date.toISOString().slice(0, -1);
}

/**
 * Milliseconds on a clock that never steps: the process's start time (`performance.timeOrigin`)
 * plus the monotonic time since (`performance.now()`). For every interval, spacing, deadline of a
 * wait and in-memory wake-up time — never `Date.now()` differences, which a wall-clock step (NTP,
 * `date -s`, a resumed VM) turns into hours of sleep, or none (issue 24, item 16). Comparable
 * across the processes of one machine (cluster workers) that started before a step; a process
 * started after one differs by the step, which the wake-up safety nets bound. Not for dates:
 * persisted times and business deadlines (limit windows, expiries) use `Clock`.
 */
export function monotonicNow(): number {
  return performance.timeOrigin + performance.now();
}

/**
 * Tells when the wall clock (`Clock`) went back: a call answers true when the clock fell behind the
 * monotonic clock by more than `toleranceMs` since the previous call (the first call only takes
 * its reference). Deadlines persisted on the wall clock (a lease, a due time) written before a
 * backward step lie in the future by the step; a worker that sees true clamps the ones beyond
 * their longest legitimate length (issue 24, item 16). Call it where such deadlines are written
 * too, so that a step forward and back between two looks is still seen. Forward steps need
 * nothing: deadlines fall due early.
 */
export class BackwardSteps {
  private offset: number | undefined;
  constructor(
    private readonly clock: Clock,
    private readonly toleranceMs = 1_000,
  ) {}

  seen(): boolean {
    const offset = this.clock.now().getTime() - monotonicNow();
    const before = this.offset;
    if (before === undefined || offset > before) {
      // The first look, drift and forward steps move the reference up, so that only a later step
      // back is seen.
      this.offset = offset;
      return false;
    }
    if (offset < before - this.toleranceMs) {
      this.offset = offset;
      return true;
    }
    return false;
  }
}
