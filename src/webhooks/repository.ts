import { channelSql, notify, PLAN_EACH_RUN, type Sql } from '../db/db.js';

/** SQL of the webhooks domain: registrations, fan-out of the outbox, delivery claims and results. */

/**
 * Wake-up channels of the delivery engine (docs/decisions.md, "Idle: wake-ups instead of polling"):
 *   outbox            an event was written (wakeLocal from emitEvent: this process's dispatcher)
 *   webhook_delivery  a delivery became due now (NOTIFY: the senders of every process)
 *   events            events were fanned out (NOTIFY: the live event streams of every process)
 */
export const WAKE = { outbox: 'outbox', delivery: 'webhook_delivery', events: 'events' } as const;

export interface WebhookRow {
  id: string;
  merchant_id: number;
  account_id: number | null;
  client_id: string | null;
  url: string;
  events: string[];
  secret: string;
  description: string | null;
  is_active: boolean;
  allow_insecure: boolean;
  created_at: Date;
  updated_at: Date;
  deleted_at: Date | null;
}

/**
 * What an API key may see and delete: a merchant-wide key (accountId null) every webhook of its
 * merchant; an account key only the webhooks of its account.
 */
export interface WebhookScope {
  merchantId: number;
  accountId: number | null;
}

export interface NewWebhook {
  id: string;
  merchantId: number;
  accountId: number | null;
  /** The API key that registered it (null when written by other means). */
  clientId: string | null;
  url: string;
  events: string[];
  secret: string;
  description: string | null;
  allowInsecure: boolean;
}

/** Serializes registrations of one merchant (the per-merchant limit is checked under it). */
export async function lockMerchantWebhooks(tx: Sql, merchantId: number): Promise<void> {
  await tx.query(`SELECT pg_advisory_xact_lock(hashtext('webhooks'), $1::int)`, [merchantId % 2_147_483_647]);
}

export async function countLiveWebhooks(sql: Sql, merchantId: number): Promise<number> {
  const [row] = await sql.query<{ n: number }>(
    'SELECT count(*)::int AS n FROM webhooks WHERE merchant_id = $1 AND deleted_at IS NULL',
    [merchantId],
  );
  return row!.n;
}

export async function insertWebhook(tx: Sql, w: NewWebhook): Promise<WebhookRow> {
  const [row] = await tx.query<WebhookRow>(
    `INSERT INTO webhooks (id, merchant_id, account_id, client_id, url, events, secret, description, allow_insecure)
     VALUES ($1, $2, $3, $4, $5, $6::text[], $7, $8, $9) RETURNING *`,
    [w.id, w.merchantId, w.accountId, w.clientId, w.url, w.events, w.secret, w.description, w.allowInsecure],
  );
  return row!;
}

export async function listWebhooks(sql: Sql, scope: WebhookScope): Promise<WebhookRow[]> {
  return sql.query<WebhookRow>(
    `SELECT * FROM webhooks
      WHERE merchant_id = $1 AND deleted_at IS NULL AND ($2::bigint IS NULL OR account_id = $2)
      ORDER BY created_at, id`,
    [scope.merchantId, scope.accountId],
  );
}

/** Soft-deletes a webhook within the scope and cancels its pending deliveries; false when none matched. */
export async function deleteWebhook(tx: Sql, scope: WebhookScope, id: string): Promise<boolean> {
  const rows = await tx.query(
    `UPDATE webhooks SET deleted_at = now(), updated_at = now()
      WHERE id = $1 AND merchant_id = $2 AND deleted_at IS NULL AND ($3::bigint IS NULL OR account_id = $3)
      RETURNING id`,
    [id, scope.merchantId, scope.accountId],
  );
  if (rows.length === 0) return false;
  await tx.query(
    `UPDATE webhook_deliveries SET status = 'cancelled', claim_token = NULL, updated_at = now()
      WHERE webhook_id = $1 AND status = 'pending'`,
    [id],
  );
  return true;
}

/** Any webhook, deleted ones included (operator view). */
export async function findWebhook(sql: Sql, id: string): Promise<WebhookRow | undefined> {
  const [row] = await sql.query<WebhookRow>('SELECT * FROM webhooks WHERE id = $1', [id]);
  return row;
}

/**
 * Pauses or resumes a webhook. Its pending deliveries stay; while it is paused they are taken off the
 * senders' due index (ready = false; one in flight finishes), and on resume the heads of its subject
 * queues become ready again.
 */
export async function setWebhookActive(tx: Sql, id: string, active: boolean): Promise<WebhookRow | undefined> {
  const [row] = await tx.query<WebhookRow>(
    'UPDATE webhooks SET is_active = $2, updated_at = now() WHERE id = $1 AND deleted_at IS NULL RETURNING *',
    [id, active],
  );
  if (!row) return undefined;
  if (active) {
    await promoteStrandedHeads(tx, id);
    await notify(tx, WAKE.delivery); // its ready deliveries are due again (the senders left them out)
  } else {
    await tx.query(
      `UPDATE webhook_deliveries SET ready = false, updated_at = now()
        WHERE webhook_id = $1 AND status = 'pending' AND ready AND claim_token IS NULL`,
      [id],
    );
  }
  return row;
}

export interface AdminWebhookFilter {
  id?: string | undefined;
  merchantId?: number | undefined;
  accountId?: number | undefined;
  includeDeleted: boolean;
}

export interface WebhookWithCounts extends WebhookRow {
  pending: number;
  delivered: number;
  failed: number;
  cancelled: number;
}

export async function listWebhooksForOperator(sql: Sql, filter: AdminWebhookFilter, limit: number): Promise<WebhookWithCounts[]> {
  return sql.query<WebhookWithCounts>(
    `SELECT w.*,
            (SELECT count(*)::int FROM webhook_deliveries d WHERE d.webhook_id = w.id AND d.status = 'pending') AS pending,
            (SELECT count(*)::int FROM webhook_deliveries d WHERE d.webhook_id = w.id AND d.status = 'delivered') AS delivered,
            (SELECT count(*)::int FROM webhook_deliveries d WHERE d.webhook_id = w.id AND d.status = 'failed') AS failed,
            (SELECT count(*)::int FROM webhook_deliveries d WHERE d.webhook_id = w.id AND d.status = 'cancelled') AS cancelled
       FROM webhooks w
      WHERE ($1::bigint IS NULL OR w.merchant_id = $1) AND ($2::bigint IS NULL OR w.account_id = $2)
        AND ($3::boolean OR w.deleted_at IS NULL) AND ($5::uuid IS NULL OR w.id = $5)
      ORDER BY w.created_at DESC, w.id
      LIMIT $4`,
    [filter.merchantId ?? null, filter.accountId ?? null, filter.includeDeleted, limit, filter.id ?? null],
  );
}

// ---------------------------------------------------------------------------------------------
// Fan-out

export interface DispatchResult {
  events: number;
  /** Names of the events fanned out (metrics count them here: once, after commit). */
  names: string[];
  deliveries: number;
  /** Deliveries written not ready (behind an earlier pending delivery of their subject). */
  followers: number;
}

/**
 * SQL: the delivery `d` (a row with webhook_id, subject and outbox_id) heads its subject's queue
 * for its webhook — no earlier delivery of the subject to the webhook is pending and no earlier
 * event of the subject waits for fan-out (in outbox_pending), leaving out the events in
 * `fanningOut` (an SQL array of outbox ids: those the calling statement fans out itself). Each
 * check is a scalar subquery (one probe of webhook_deliveries_subject_idx, one of
 * outbox_pending_subject_idx per delivery), which the planner cannot turn into an anti-join over
 * the whole queue.
 */
const SUBJECT_HEAD = (d: string, fanningOut?: string) => `(SELECT 1 FROM webhook_deliveries p
                 WHERE p.webhook_id = ${d}.webhook_id AND p.subject = ${d}.subject
                   AND p.status = 'pending' AND p.outbox_id < ${d}.outbox_id LIMIT 1) IS NULL
          AND (SELECT 1 FROM outbox_pending o
                WHERE o.subject = ${d}.subject AND o.id < ${d}.outbox_id${fanningOut ? ` AND NOT (o.id = ANY(${fanningOut}))` : ''} LIMIT 1) IS NULL`;

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
       SELECT e.id, e.event, e.subject, e.merchant_id, e.account_id FROM outbox_events e
        WHERE e.id = ANY (ARRAY(SELECT id FROM claimed))),
     inserted AS (
       INSERT INTO webhook_deliveries (webhook_id, outbox_id, event, subject, ready)
       SELECT m.webhook_id, m.outbox_id, m.event, m.subject,
              m.rn = 1 AND ${SUBJECT_HEAD('m', 'ARRAY(SELECT id FROM claimed)')}
         FROM (SELECT w.id AS webhook_id, e.id AS outbox_id, e.event, e.subject,
                      row_number() OVER (PARTITION BY w.id, e.subject ORDER BY e.id) AS rn
                 FROM events e
                 JOIN webhooks w ON w.merchant_id = e.merchant_id
                                AND (w.account_id IS NULL OR w.account_id = e.account_id)
                                AND w.is_active AND w.deleted_at IS NULL
                WHERE e.event = ANY(w.events)
                   OR EXISTS (SELECT 1 FROM unnest($2::text[], $3::text[]) AS a(alias, target)
                               WHERE a.target = e.event AND a.alias = ANY(w.events))) m
        ORDER BY m.outbox_id
       ON CONFLICT (webhook_id, outbox_id) DO NOTHING
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
       SELECT d.id, d.webhook_id, d.next_attempt_at
         FROM webhook_deliveries d
        WHERE d.status = 'pending' AND d.ready AND d.next_attempt_at <= now()
          AND NOT (d.webhook_id = ANY($3::uuid[]))
          AND EXISTS (SELECT 1 FROM webhooks w WHERE w.id = d.webhook_id AND w.is_active AND w.deleted_at IS NULL)
        ORDER BY d.next_attempt_at
        LIMIT $1 * 4
     ), ranked AS (
       SELECT c.id, c.next_attempt_at, COALESCE(k.room, $2) AS room,
              row_number() OVER (PARTITION BY c.webhook_id ORDER BY c.next_attempt_at) AS rn
         FROM candidates c LEFT JOIN unnest($6::uuid[], $7::int[]) AS k(webhook_id, room) ON k.webhook_id = c.webhook_id
     ), locked AS (
       -- The candidates by primary key, and the subject checks one index probe each (scalar
       -- subqueries, never anti-joins): planned as joins, with statistics taken while the queue
       -- was nearly empty, they scanned every pending delivery for each candidate.
       SELECT d.id FROM webhook_deliveries d
        WHERE d.id = ANY (ARRAY(SELECT r.id FROM ranked r WHERE r.rn <= r.room))
          AND d.status = 'pending' AND d.next_attempt_at <= now()
          AND ${SUBJECT_HEAD('d')}
        ORDER BY d.next_attempt_at
        LIMIT $1
        FOR UPDATE OF d SKIP LOCKED
     )
     UPDATE webhook_deliveries d
        SET attempts = d.attempts + 1, claim_token = $4,
            next_attempt_at = now() + $5 * interval '1 millisecond', updated_at = now()
       FROM locked l, webhooks w, outbox_events o
      WHERE d.id = l.id AND w.id = d.webhook_id AND o.id = d.outbox_id
      RETURNING d.id, d.webhook_id, d.event, d.attempts, d.retry_step, d.claim_token,
                w.url, w.secret, o.payload, o.created_at AS event_created_at`,
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
    `SELECT (extract(epoch FROM min(d.next_attempt_at) - now()) * 1000)::float8 AS ms
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
                            $9::int[], $10::text[], $11::int[], $12::text[])
                AS u(id, token, status, step_inc, delay_ms, started_at, status_code, error, attempt, worker, duration_ms, response_body)
     ), logged AS (
       INSERT INTO webhook_attempts (delivery_id, attempt, worker, started_at, duration_ms, status_code, error, response_body)
       SELECT id, attempt, worker, started_at, duration_ms, status_code, error, response_body FROM u
       ON CONFLICT (delivery_id, attempt) DO NOTHING
     ), done AS (
       UPDATE webhook_deliveries d
          SET status = u.status,
              retry_step = d.retry_step + u.step_inc,
              next_attempt_at = CASE WHEN u.delay_ms IS NULL THEN d.next_attempt_at ELSE now() + u.delay_ms * interval '1 millisecond' END,
              delivered_at = CASE WHEN u.status = 'delivered' THEN now() ELSE d.delivered_at END,
              failed_at = CASE WHEN u.status = 'failed' THEN now() ELSE d.failed_at END,
              claim_token = NULL, last_attempt_at = u.started_at, last_status_code = u.status_code, last_error = u.error,
              updated_at = now()
         FROM u
        -- d.id = ANY($1) too: the deliveries found by primary key, not by a scan of every
        -- pending one (the plan made while the queue was analyzed nearly empty).
        WHERE d.id = ANY($1::uuid[]) AND d.id = u.id AND d.claim_token = u.token AND d.status = 'pending'
        RETURNING d.id, u.status, d.webhook_id, d.subject, d.outbox_id
     ), promoted AS (
       UPDATE webhook_deliveries n SET ready = true, updated_at = now()
         FROM (SELECT DISTINCT ON (f.webhook_id, f.subject) f.id, f.ready
                 FROM done x
                 JOIN webhook_deliveries f ON f.webhook_id = x.webhook_id AND f.subject = x.subject
                                          AND f.status = 'pending' AND f.outbox_id > x.outbox_id
                WHERE x.status <> 'pending'
                ORDER BY f.webhook_id, f.subject, f.outbox_id) h
        WHERE n.id = h.id AND NOT h.ready
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
       FROM webhook_deliveries d JOIN outbox_events o ON o.id = d.outbox_id
      WHERE d.webhook_id = $1 AND ($2::text IS NULL OR d.status = $2) AND ($3::bigint IS NULL OR d.outbox_id < $3)
      ORDER BY d.outbox_id DESC
      LIMIT $4`,
    [webhookId, options.status ?? null, options.before ?? null, options.limit],
  );
}

export async function findDelivery(sql: Sql, webhookId: string, deliveryId: string): Promise<DeliveryRow | undefined> {
  const [row] = await sql.query<DeliveryRow>(
    `SELECT ${DELIVERY_COLUMNS}
       FROM webhook_deliveries d JOIN outbox_events o ON o.id = d.outbox_id
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
        SET status = 'pending', ready = true, retry_step = 0, next_attempt_at = now(), claim_token = NULL,
            delivered_at = NULL, failed_at = NULL, updated_at = now()
      WHERE webhook_id = $1 AND id = $2 AND status <> 'pending'
      RETURNING id`,
    [webhookId, deliveryId],
  );
  if (rows.length === 1) await notify(sql, WAKE.delivery);
  return rows.length === 1;
}

/** A delivery of an event just written, for exactly one webhook: the event is taken out of the fan-out queue. */
export async function insertDirectDelivery(tx: Sql, webhookId: string, outboxEventId: string): Promise<string> {
  const [row] = await tx.query<{ id: string }>(
    `WITH d AS (
       INSERT INTO webhook_deliveries (webhook_id, outbox_id, event, subject)
       SELECT $1, o.id, o.event, o.subject FROM outbox_events o WHERE o.event_id = $2
       RETURNING id, outbox_id),
     taken AS (DELETE FROM outbox_pending p USING d WHERE p.id = d.outbox_id)
     SELECT id FROM d`,
    [webhookId, outboxEventId],
  );
  await notify(tx, WAKE.delivery);
  return row!.id;
}
