import type pg from 'pg';
import type { Anomaly } from './audit.js';
import { sleep } from './infra.js';

/** What is still in flight after the faults: payouts and refunds, MED returns, rail work, events and deliveries. */
export async function inFlight(db: pg.Client): Promise<Record<string, number>> {
  const { rows } = await db.query(`SELECT
    (SELECT count(*) FROM transactions WHERE kind IN ('cash_out', 'refund', 'med_refund') AND stage < 3)::int AS payouts,
    (SELECT count(*) FROM med_infractions WHERE refund_status = 'processing')::int AS med_refunds,
    (SELECT count(*) FROM sim_notifications)::int AS rail_notifications,
    (SELECT count(*) FROM sim_payments WHERE status IN ('protection', 'in_flight'))::int AS rail_payments,
    (SELECT count(*) FROM outbox_pending)::int AS undispatched,
    (SELECT count(*) FROM webhook_deliveries WHERE status = 'pending')::int AS deliveries`);
  return rows[0] as Record<string, number>;
}

/**
 * Waits until nothing is in flight, for at most `drainMs`; past it, a `did_not_drain` anomaly names
 * what was left. Shared by the chaos suite and the high-availability lab.
 */
export async function waitDrained(db: pg.Client, drainMs: number, label: string, anomalies: Anomaly[]): Promise<void> {
  const deadline = Date.now() + drainMs;
  for (;;) {
    const r = await inFlight(db);
    if (Object.values(r).every((n) => n === 0)) return;
    if (Date.now() > deadline) {
      anomalies.push({ check: 'did_not_drain', detail: `${label}: still in flight after ${drainMs} ms: ${JSON.stringify(r)}` });
      return;
    }
    await sleep(500);
  }
}
