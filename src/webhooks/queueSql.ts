/**
 * Shared pieces of the webhooks SQL (split by statement family: endpointsRepo.ts, fanoutRepo.ts,
 * deliveriesRepo.ts; repository.ts re-exports them all).
 */

/**
 * Wake-up channels of the delivery engine (docs/decisions.md, "Idle: wake-ups instead of polling"):
 *   outbox            an event was written (wakeLocal from emitEvent: this process's dispatcher)
 *   webhook_delivery  a delivery became due now (NOTIFY: the senders of every process)
 *   events            events were fanned out (NOTIFY: the live event streams of every process)
 */
export const WAKE = { outbox: 'outbox', delivery: 'webhook_delivery', events: 'events' } as const;

/**
 * SQL: the delivery `d` (a row with webhook_id, subject and outbox_id) heads its subject's queue
 * for its webhook — no earlier delivery of the subject to the webhook is pending and no earlier
 * event of the subject waits for fan-out (in outbox_pending), leaving out the events in
 * `fanningOut` (an SQL array of outbox ids: those the calling statement fans out itself). Each
 * check is a scalar subquery (one probe of webhook_deliveries_subject_idx, one of
 * outbox_pending_subject_idx per delivery), which the planner cannot turn into an anti-join over
 * the whole queue.
 */
export const SUBJECT_HEAD = (d: string, fanningOut?: string) => `(SELECT 1 FROM webhook_deliveries p
                 WHERE p.webhook_id = ${d}.webhook_id AND p.subject = ${d}.subject
                   AND p.status = 'pending' AND p.outbox_id < ${d}.outbox_id LIMIT 1) IS NULL
          AND (SELECT 1 FROM outbox_pending o
                WHERE o.subject = ${d}.subject AND o.id < ${d}.outbox_id${fanningOut ? ` AND NOT (o.id = ANY(${fanningOut}))` : ''} LIMIT 1) IS NULL`;
