import { channelSql, notify, PLAN_EACH_RUN, type Sql } from '../db/db.js';
import { SUBJECT_HEAD, WAKE } from './queueSql.js';

/** SQL of the fan-out: outbox events waiting in outbox_pending become webhook deliveries. */

export interface DispatchResult {
  events: number;
  /** Names of the events fanned out (metrics count them here: once, after commit). */
  names: string[];
  deliveries: number;
  /** Deliveries written not ready (behind an earlier pending delivery of their subject). */
  followers: number;
}

/**
 * The fan-out, in one statement (atomic on its own: no BEGIN/COMMIT round trips): claims up to
 * `$1` events waiting in outbox_pending (oldest first, SKIP LOCKED so dispatchers in other
 * processes take other rows) by deleting their rows, creates one delivery per matching webhook,
 * and notifies. A webhook matches when it is live and active, belongs to the event's merchant, is
 * global or of the event's account, and subscribes to the event or to an alias of it (`$2`/`$3`:
 * pairs alias, event). A delivery is born ready (head of its subject queue for the webhook) when
 * it is the batch's first of its subject and nothing earlier of the subject is pending or still
 * waiting for fan-out (the claimed rows, which the statement's snapshot still sees, left out).
 * One NOTIFY per batch, delivered at commit: the senders of other processes (this process's sender
 * is woken directly) and the live event streams of every process look at once.
 */
const DISPATCH_OUTBOX = `${PLAN_EACH_RUN}WITH claimed AS (
       DELETE FROM outbox_pending
        WHERE id = ANY (ARRAY(SELECT id FROM outbox_pending ORDER BY id LIMIT $1 FOR UPDATE SKIP LOCKED))
       RETURNING id),
     events AS MATERIALIZED (
       SELECT e.id, e.event, e.subject, e.merchant_id, e.account_id, e.created_at FROM outbox_events e
        WHERE e.id = ANY (ARRAY(SELECT id FROM claimed))),
     inserted AS (
       INSERT INTO webhook_deliveries (webhook_id, outbox_id, event, subject, event_created_at, ready)
       SELECT m.webhook_id, m.outbox_id, m.event, m.subject, m.created_at,
              m.rn = 1 AND ${SUBJECT_HEAD('m', 'ARRAY(SELECT id FROM claimed)')}
         FROM (SELECT w.id AS webhook_id, e.id AS outbox_id, e.event, e.subject, e.created_at,
                      row_number() OVER (PARTITION BY w.id, e.subject ORDER BY e.id) AS rn
                 FROM events e
                 JOIN webhooks w ON w.merchant_id = e.merchant_id
                                AND (w.account_id IS NULL OR w.account_id = e.account_id)
                                AND w.is_active AND w.deleted_at IS NULL
                WHERE e.event = ANY(w.events)
                   OR EXISTS (SELECT 1 FROM unnest($2::text[], $3::text[]) AS a(alias, target)
                               WHERE a.target = e.event AND a.alias = ANY(w.events))) m
        ORDER BY m.outbox_id
       ON CONFLICT (webhook_id, outbox_id, event_created_at) DO NOTHING
       RETURNING ready),
     counts AS MATERIALIZED (
       SELECT (SELECT array_agg(event ORDER BY id) FROM events) AS names,
              (SELECT count(*) FROM inserted)::int AS deliveries,
              (SELECT count(*) FROM inserted WHERE NOT ready)::int AS followers)
     SELECT c.names, c.deliveries, c.followers,
            CASE WHEN c.names IS NOT NULL THEN pg_notify(${channelSql('$4')}, '') END AS events_notified,
            CASE WHEN c.deliveries > 0 THEN pg_notify(${channelSql('$5')}, '') END AS deliveries_notified
       FROM counts c`;

/** Runs the fan-out (`DISPATCH_OUTBOX`) for up to `limit` events. */
export async function dispatchOutbox(sql: Sql, limit: number, aliases: ReadonlyArray<readonly [string, string]>): Promise<DispatchResult> {
  const [row] = await sql.query<{ names: string[] | null; deliveries: number; followers: number }>(DISPATCH_OUTBOX, [
    limit,
    aliases.map((a) => a[0]),
    aliases.map((a) => a[1]),
    WAKE.events,
    WAKE.delivery,
  ]);
  const names = row?.names ?? [];
  return { events: names.length, names, deliveries: row?.deliveries ?? 0, followers: row?.followers ?? 0 };
}

/** A delivery of an event just written, for exactly one webhook: the event is taken out of the fan-out queue. */
export async function insertDirectDelivery(tx: Sql, webhookId: string, outboxEventId: string): Promise<string> {
  const [row] = await tx.query<{ id: string }>(
    `WITH d AS (
       INSERT INTO webhook_deliveries (webhook_id, outbox_id, event, subject, event_created_at)
       SELECT $1, o.id, o.event, o.subject, o.created_at FROM outbox_events o WHERE o.event_id = $2
       RETURNING id, outbox_id),
     taken AS (DELETE FROM outbox_pending p USING d WHERE p.id = d.outbox_id)
     SELECT id FROM d`,
    [webhookId, outboxEventId],
  );
  await notify(tx, WAKE.delivery);
  return row!.id;
}
