import { notify, PLAN_EACH_RUN, type Sql } from '../db/db.js';
import { SUBJECT_HEAD, WAKE } from './queueSql.js';

/** SQL of deliveries and their attempts: claims, results, and the operator view. */

// ---------------------------------------------------------------------------------------------
// Claims and results

export interface DeliveryJob {
  id: string;
  webhook_id: string;
  event: string;
  attempts: number;
  retry_step: number;
  claim_token: string;
  url: string;
  secret: string;
  payload: Record<string, unknown>;
  event_created_at: Date;
  /**
   * The delivery's partition key (its event's created_at) as PostgreSQL's text, exact to the
   * microsecond (a Date keeps milliseconds): handed back with the attempt (AttemptRecord).
   */
  partition_key: string;
}

/**
 * Claims up to `limit` due deliveries and takes a lease on them (`next_attempt_at` = now + lease), in
 * one statement. A delivery is due when it is pending, ready (head of its subject queue), its time has
 * come and its webhook is live and active. The order of a subject is re-checked here, whatever
 * `ready` says: no earlier delivery of the subject to the webhook may be pending, and no earlier event
 * of the subject may still wait for fan-out. At most `perWebhook` deliveries of one webhook per claim,
 * fewer for the webhooks in `room` (the caller's in-flight ones: webhook id → how many more).
 */
export async function claimDeliveries(
  sql: Sql,
  options: { limit: number; perWebhook: number; leaseMs: number; room: ReadonlyMap<string, number>; claimToken: string },
): Promise<DeliveryJob[]> {
  const full = [...options.room].filter(([, n]) => n <= 0).map(([id]) => id);
  const partial = [...options.room].filter(([, n]) => n > 0);
  return sql.query<DeliveryJob>(
    `${PLAN_EACH_RUN}WITH candidates AS (
       SELECT d.id, d.webhook_id, d.next_attempt_at, d.event_created_at
         FROM webhook_deliveries d
        WHERE d.status = 'pending' AND d.ready AND d.next_attempt_at <= business_now()
          AND NOT (d.webhook_id = ANY($3::uuid[]))
          AND EXISTS (SELECT 1 FROM webhooks w WHERE w.id = d.webhook_id AND w.is_active AND w.deleted_at IS NULL)
        ORDER BY d.next_attempt_at
        LIMIT $1 * 4
     ), ranked AS (
       SELECT c.id, c.next_attempt_at, c.event_created_at, COALESCE(k.room, $2) AS room,
              row_number() OVER (PARTITION BY c.webhook_id ORDER BY c.next_attempt_at) AS rn
         FROM candidates c LEFT JOIN unnest($6::uuid[], $7::int[]) AS k(webhook_id, room) ON k.webhook_id = c.webhook_id
     ), locked AS (
       -- The candidates by primary key, and the subject checks one index probe each (scalar
       -- subqueries, never anti-joins): planned as joins, with statistics taken while the queue
       -- was nearly empty, they scanned every pending delivery for each candidate.
       -- The partition key too (the event's day), so only the partitions of those days are read.
       SELECT d.id, d.event_created_at FROM webhook_deliveries d
        WHERE d.id = ANY (ARRAY(SELECT r.id FROM ranked r WHERE r.rn <= r.room))
          AND d.event_created_at = ANY (ARRAY(SELECT r.event_created_at FROM ranked r WHERE r.rn <= r.room))
          AND d.status = 'pending' AND d.next_attempt_at <= business_now()
          AND ${SUBJECT_HEAD('d')}
        ORDER BY d.next_attempt_at
        LIMIT $1
        FOR UPDATE OF d SKIP LOCKED
     )
     UPDATE webhook_deliveries d
        SET attempts = d.attempts + 1, claim_token = $4,
            next_attempt_at = business_now() + $5 * interval '1 millisecond', updated_at = now()
       FROM locked l, webhooks w, outbox_events o
      WHERE d.id = l.id AND d.event_created_at = l.event_created_at AND w.id = d.webhook_id AND o.id = d.outbox_id AND o.created_at = d.event_created_at
      RETURNING d.id, d.webhook_id, d.event, d.attempts, d.retry_step, d.claim_token,
                w.url, w.secret, o.payload, o.created_at AS event_created_at, d.event_created_at::text AS partition_key`,
    [options.limit, options.perWebhook, full, options.claimToken, options.leaseMs, partial.map((p) => p[0]), partial.map((p) => p[1])],
  );
}

/**
 * Milliseconds until the earliest pending, ready delivery of a live, active webhook is due (<= 0:
 * due already; null: none), as the database's clock sees it; webhooks in `exclude` (no room in
 * the caller) are left out. Includes leased deliveries: a lease running out makes one due again.
 */
export async function nextDueInMs(sql: Sql, exclude: readonly string[]): Promise<number | null> {
  const [row] = await sql.query<{ ms: number | null }>(
    `SELECT (extract(epoch FROM min(d.next_attempt_at) - business_now()) * 1000)::float8 AS ms
       FROM webhook_deliveries d
      WHERE d.status = 'pending' AND d.ready AND NOT (d.webhook_id = ANY($1::uuid[]))
        AND EXISTS (SELECT 1 FROM webhooks w WHERE w.id = d.webhook_id AND w.is_active AND w.deleted_at IS NULL)`,
    [exclude],
  );
  return row?.ms ?? null;
}

/**
 * Safety net of the fast path above: makes ready every pending delivery of an active webhook that has
 * become the head of its queue without being promoted (a head that finished while its follower was
 * being fanned out in another transaction; a webhook resumed after a pause). Cheap when there is
 * nothing to repair; run every few seconds, and for one webhook when it is resumed.
 */
export async function promoteStrandedHeads(sql: Sql, webhookId: string | null = null): Promise<number> {
  const rows = await sql.query(
    `${PLAN_EACH_RUN}UPDATE webhook_deliveries d SET ready = true, updated_at = now()
      WHERE d.status = 'pending' AND NOT d.ready AND ($1::uuid IS NULL OR d.webhook_id = $1)
        AND EXISTS (SELECT 1 FROM webhooks w WHERE w.id = d.webhook_id AND w.is_active AND w.deleted_at IS NULL)
        AND ${SUBJECT_HEAD('d')}
      RETURNING d.id`,
    [webhookId],
  );
  return rows.length;
}

export interface AttemptRecord {
  deliveryId: string;
  claimToken: string;
  attempt: number;
  worker: string;
  startedAt: Date;
  durationMs: number;
  statusCode: number | null;
  error: string | null;
  responseBody: string | null;
  /** The delivery's partition key (DeliveryJob.partition_key). */
  partitionKey: string;
}

/**
 * What becomes of a delivery after an attempt:
 *   delivered      2xx
 *   retry          wait `delayMs`, then try again (retry_step + 1)
 *   failed         schedule exhausted
 *   release        the attempt did not count (worker stopping): due again now
 */
export type AttemptOutcome =
  | { kind: 'delivered' }
  | { kind: 'retry'; delayMs: number }
  | { kind: 'failed' }
  | { kind: 'release' };

/**
 * Records attempts and applies their outcomes, in one statement. A delivery row changes only if it
 * still carries its attempt's claim token (a lease that ran out and was taken over by another worker
 * is not overwritten); the attempt itself is always recorded. A delivery that finished (delivered or
 * failed for good) makes the next delivery of its (webhook, subject) queue ready. Returns the ids of
 * the deliveries whose row was updated.
 */
export async function recordAttempts(sql: Sql, batch: ReadonlyArray<{ attempt: AttemptRecord; outcome: AttemptOutcome }>): Promise<Set<string>> {
  if (batch.length === 0) return new Set();
  const a = batch.map((b) => b.attempt);
  // Per row: the new status, whether the retry step advances, and the wait before the next attempt
  // (null: the row is final, next_attempt_at stays).
  const status = batch.map((b) => (b.outcome.kind === 'delivered' ? 'delivered' : b.outcome.kind === 'failed' ? 'failed' : 'pending'));
  const stepInc = batch.map((b) => (b.outcome.kind === 'retry' || b.outcome.kind === 'failed' ? 1 : 0));
  const delayMs = batch.map((b) => (b.outcome.kind === 'retry' ? b.outcome.delayMs : b.outcome.kind === 'release' ? 0 : null));
  const rows = await sql.query<{ id: string }>(
    `${PLAN_EACH_RUN}WITH u AS (
       SELECT * FROM unnest($1::uuid[], $2::uuid[], $3::text[], $4::int[], $5::int[], $6::timestamptz[], $7::int[], $8::text[],
                            $9::int[], $10::text[], $11::int[], $12::text[], $13::text[]::timestamptz[])
                AS u(id, token, status, step_inc, delay_ms, started_at, status_code, error, attempt, worker, duration_ms, response_body,
                     event_created_at)
     ), logged AS (
       INSERT INTO webhook_attempts (delivery_id, attempt, worker, started_at, duration_ms, status_code, error, response_body, event_created_at)
       SELECT id, attempt, worker, started_at, duration_ms, status_code, error, response_body, event_created_at FROM u
       ON CONFLICT (delivery_id, attempt, event_created_at) DO NOTHING
     ), done AS (
       UPDATE webhook_deliveries d
          SET status = u.status,
              retry_step = d.retry_step + u.step_inc,
              next_attempt_at = CASE WHEN u.delay_ms IS NULL THEN d.next_attempt_at ELSE business_now() + u.delay_ms * interval '1 millisecond' END,
              delivered_at = CASE WHEN u.status = 'delivered' THEN now() ELSE d.delivered_at END,
              failed_at = CASE WHEN u.status = 'failed' THEN now() ELSE d.failed_at END,
              claim_token = NULL, last_attempt_at = u.started_at, last_status_code = u.status_code, last_error = u.error,
              updated_at = now()
         FROM u
        -- d.id = ANY($1) too: the deliveries found by primary key, not by a scan of every
        -- pending one (the plan made while the queue was analyzed nearly empty).
        -- The partition keys too: only the partitions of those events' days are read.
        WHERE d.id = ANY($1::uuid[]) AND d.event_created_at = ANY($13::text[]::timestamptz[])
          AND d.id = u.id AND d.event_created_at = u.event_created_at AND d.claim_token = u.token AND d.status = 'pending'
        RETURNING d.id, u.status, d.webhook_id, d.subject, d.outbox_id
     ), promoted AS (
       UPDATE webhook_deliveries n SET ready = true, updated_at = now()
         FROM (SELECT DISTINCT ON (f.webhook_id, f.subject) f.id, f.event_created_at, f.ready
                 FROM done x
                 JOIN webhook_deliveries f ON f.webhook_id = x.webhook_id AND f.subject = x.subject
                                          AND f.status = 'pending' AND f.outbox_id > x.outbox_id
                WHERE x.status <> 'pending'
                ORDER BY f.webhook_id, f.subject, f.outbox_id) h
        WHERE n.id = h.id AND n.event_created_at = h.event_created_at AND NOT h.ready
     )
     SELECT id FROM done`,
    [
      a.map((x) => x.deliveryId),
      a.map((x) => x.claimToken),
      status,
      stepInc,
      delayMs,
      a.map((x) => x.startedAt),
      a.map((x) => x.statusCode),
      a.map((x) => x.error),
      a.map((x) => x.attempt),
      a.map((x) => x.worker),
      a.map((x) => x.durationMs),
      a.map((x) => x.responseBody),
      a.map((x) => x.partitionKey),
    ],
  );
  return new Set(rows.map((r) => r.id));
}

// ---------------------------------------------------------------------------------------------
// Operator view

export interface DeliveryRow {
  id: string;
  webhook_id: string;
  outbox_id: number;
  event: string;
  subject: string;
  status: 'pending' | 'delivered' | 'failed' | 'cancelled';
  attempts: number;
  retry_step: number;
  next_attempt_at: Date;
  claim_token: string | null;
  last_attempt_at: Date | null;
  last_status_code: number | null;
  last_error: string | null;
  created_at: Date;
  updated_at: Date;
  delivered_at: Date | null;
  failed_at: Date | null;
  event_id: string;
  event_created_at: Date;
  payload: Record<string, unknown>;
}

export interface AttemptRow {
  delivery_id: string;
  attempt: number;
  worker: string;
  started_at: Date;
  duration_ms: number;
  status_code: number | null;
  error: string | null;
  response_body: string | null;
}

const DELIVERY_COLUMNS = `d.*, o.event_id, o.created_at AS event_created_at, o.payload`;

/** Deliveries of a webhook, newest event first; `before` is an outbox id (the cursor). */
export async function listDeliveries(
  sql: Sql,
  webhookId: string,
  options: { status?: string | undefined; before?: number | undefined; limit: number },
): Promise<DeliveryRow[]> {
  return sql.query<DeliveryRow>(
    `SELECT ${DELIVERY_COLUMNS}
       FROM webhook_deliveries d JOIN outbox_events o ON o.id = d.outbox_id AND o.created_at = d.event_created_at
      WHERE d.webhook_id = $1 AND ($2::text IS NULL OR d.status = $2) AND ($3::bigint IS NULL OR d.outbox_id < $3)
      ORDER BY d.outbox_id DESC
      LIMIT $4`,
    [webhookId, options.status ?? null, options.before ?? null, options.limit],
  );
}

export async function findDelivery(sql: Sql, webhookId: string, deliveryId: string): Promise<DeliveryRow | undefined> {
  const [row] = await sql.query<DeliveryRow>(
    `SELECT ${DELIVERY_COLUMNS}
       FROM webhook_deliveries d JOIN outbox_events o ON o.id = d.outbox_id AND o.created_at = d.event_created_at
      WHERE d.webhook_id = $1 AND d.id = $2`,
    [webhookId, deliveryId],
  );
  return row;
}

export async function attemptsOf(sql: Sql, deliveryIds: readonly string[]): Promise<AttemptRow[]> {
  if (deliveryIds.length === 0) return [];
  return sql.query<AttemptRow>(
    `SELECT delivery_id, attempt, worker, started_at, duration_ms, status_code, error, response_body
       FROM webhook_attempts WHERE delivery_id = ANY($1::uuid[]) ORDER BY delivery_id, attempt`,
    [deliveryIds],
  );
}

/**
 * Puts a finished delivery back in the queue, due now, with a fresh retry schedule. Being the oldest
 * pending delivery of its subject, it goes before any later one still pending.
 */
export async function requeueDelivery(sql: Sql, webhookId: string, deliveryId: string): Promise<boolean> {
  const rows = await sql.query(
    `UPDATE webhook_deliveries
        SET status = 'pending', ready = true, retry_step = 0, next_attempt_at = business_now(), claim_token = NULL,
            delivered_at = NULL, failed_at = NULL, updated_at = now()
      WHERE webhook_id = $1 AND id = $2 AND status <> 'pending'
      RETURNING id`,
    [webhookId, deliveryId],
  );
  if (rows.length === 1) await notify(sql, WAKE.delivery);
  return rows.length === 1;
}


/**
 * Puts back in the queue, due now with a fresh retry schedule, at most `limit` deliveries of the
 * webhook that failed for good at or after `since` (oldest event first), in one statement; returns
 * how many, and how many such failures remain beyond the limit. Only `failed` rows change: a
 * delivery already requeued is pending, so running it again requeues nothing twice. The claim
 * re-checks each subject's order (SUBJECT_HEAD), so several of one subject go out in order.
 */
export async function requeueFailedSince(sql: Sql, webhookId: string, since: Date, limit: number): Promise<{ requeued: number; remaining: number }> {
  const rows = await sql.query<{ id: string }>(
    `WITH picked AS (
       SELECT id, event_created_at FROM webhook_deliveries
        WHERE webhook_id = $1 AND status = 'failed' AND failed_at >= $2
        ORDER BY outbox_id
        LIMIT $3
        FOR UPDATE
     )
     UPDATE webhook_deliveries d
        SET status = 'pending', ready = true, retry_step = 0, next_attempt_at = now(), claim_token = NULL,
            delivered_at = NULL, failed_at = NULL, updated_at = now()
       FROM picked p
      WHERE d.id = p.id AND d.event_created_at = p.event_created_at AND d.status = 'failed'
      RETURNING d.id`,
    [webhookId, since, limit],
  );
  const [left] = await sql.query<{ n: number }>(
    `SELECT count(*)::int AS n FROM webhook_deliveries WHERE webhook_id = $1 AND status = 'failed' AND failed_at >= $2`,
    [webhookId, since],
  );
  if (rows.length > 0) await notify(sql, WAKE.delivery);
  return { requeued: rows.length, remaining: left?.n ?? 0 };
}
