/** Time source; tests and the simulator inject their own. */
export interface Clock {
  now(): Date;
}

export const systemClock: Clock = { now: () => new Date() };

/** ISO 8601 UTC with trailing Z (`2026-11-21T10:00:00.000Z`), or null. */
export function isoZ(date: Date | null | undefined): string | null {
  return date ? date.toISOString() : null;
}

/** ISO 8601 UTC without zone designator ("naive"), as the webhook list form shows dates. */
export function isoNaive(date: Date): string {
  return date.toISOString().slice(0, -1);
}
