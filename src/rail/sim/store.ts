import { RELAXED_COMMIT, type Sql } from '../../db/db.js';
import type { PixKeyType } from '../rail.js';

/** SQL of the simulated central bank (tables `sim_*`). Nothing outside src/rail/ reads them. */

export type SimBehavior = 'settle' | 'reject' | 'hold' | 'timeout';
export type SimStatus = 'protection' | 'in_flight' | 'held' | 'settled' | 'rejected';

export interface DictRow {
  key: string;
  type: PixKeyType;
  name: string;
  document: string;
  ispb: string;
  bank_name: string | null;
  account_id: number | null;
  behavior: SimBehavior;
  fraud_flagged: boolean;
}

export interface SimPaymentRow {
  end_to_end_id: string;
  kind: 'payment' | 'return';
  direction: 'outbound' | 'inbound';
  transaction_id: string | null;
  original_end_to_end_id: string | null;
  amount: number;
  returned_amount: number;
  payer_name: string | null;
  payer_document: string | null;
  payer_ispb: string;
  payer_account_id: number | null;
  receiver_key: string | null;
  receiver_name: string | null;
  receiver_document: string | null;
  receiver_ispb: string;
  receiver_account_id: number | null;
  behavior: 'settle' | 'reject' | 'hold';
  status: SimStatus;
  return_code: string | null;
  reason_code: string | null;
  description: string | null;
  txid: string | null;
  due_at: Date | null;
  created_at: Date;
  resolved_at: Date | null;
}

export type NewSimPayment = Pick<SimPaymentRow, 'end_to_end_id' | 'kind' | 'direction' | 'amount' | 'payer_ispb' | 'receiver_ispb' | 'status' | 'created_at'> &
  Partial<Omit<SimPaymentRow, 'returned_amount'>>;

export interface SimNotificationRow {
  id: number;
  notification_id: string;
  subject: string;
  kind: string;
  payload: Record<string, unknown>;
  created_at: Date;
  attempts: number;
}

/** The directory entries of several keys in one statement, by key (a key not registered: absent). */
export async function findDictEntries(sql: Sql, keys: readonly string[]): Promise<Map<string, DictRow>> {
  const rows = await sql.query<DictRow>('SELECT * FROM sim_dict_entries WHERE key = ANY($1::text[])', [[...new Set(keys)]]);
  return new Map(rows.map((r) => [r.key, r]));
}

/** Registers or updates a key of another institution; refuses to touch a key of this institution's accounts. */
export async function upsertForeignKey(
  sql: Sql,
  entry: Omit<DictRow, 'account_id'>,
): Promise<{ row: DictRow; created: boolean } | 'owned'> {
  const rows = await sql.query<DictRow & { created: boolean }>(
    `INSERT INTO sim_dict_entries (key, type, name, document, ispb, bank_name, behavior, fraud_flagged)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
     ON CONFLICT (key) DO UPDATE SET type = EXCLUDED.type, name = EXCLUDED.name, document = EXCLUDED.document,
       ispb = EXCLUDED.ispb, bank_name = EXCLUDED.bank_name, behavior = EXCLUDED.behavior, fraud_flagged = EXCLUDED.fraud_flagged
       WHERE sim_dict_entries.account_id IS NULL
     RETURNING *, (xmax = 0) AS created`,
    [entry.key, entry.type, entry.name, entry.document, entry.ispb, entry.bank_name, entry.behavior, entry.fraud_flagged],
  );
  const row = rows[0];
  if (!row) return 'owned';
  const { created, ...rest } = row;
  return { row: rest, created };
}

const PAYMENT_COLUMNS = [
  'end_to_end_id', 'kind', 'direction', 'transaction_id', 'original_end_to_end_id', 'amount', 'payer_name',
  'payer_document', 'payer_ispb', 'payer_account_id', 'receiver_key', 'receiver_name', 'receiver_document',
  'receiver_ispb', 'receiver_account_id', 'behavior', 'status', 'return_code', 'reason_code', 'description',
  'txid', 'due_at', 'created_at', 'resolved_at',
] as const;

/** Inserts a payment unless its end-to-end id exists; returns the row inserted or the existing one. */
export async function insertPayment(sql: Sql, p: NewSimPayment): Promise<{ row: SimPaymentRow; inserted: boolean }> {
  const present = PAYMENT_COLUMNS.filter((c) => p[c] !== undefined);
  const inserted = await sql.query<SimPaymentRow>(
    `INSERT INTO sim_payments (${present.join(', ')}) VALUES (${present.map((_, i) => `$${i + 1}`).join(', ')})
     ON CONFLICT (end_to_end_id) DO NOTHING RETURNING *`,
    present.map((c) => p[c]),
  );
  if (inserted[0]) return { row: inserted[0], inserted: true };
  return { row: (await findPayment(sql, p.end_to_end_id))!, inserted: false };
}

export async function findPayment(sql: Sql, endToEndId: string, lock = false): Promise<SimPaymentRow | undefined> {
  const [row] = await sql.query<SimPaymentRow>(
    `SELECT * FROM sim_payments WHERE end_to_end_id = $1${lock ? ' FOR UPDATE' : ''}`,
    [endToEndId],
  );
  return row;
}

export async function findOutboundPaymentByTransactionId(sql: Sql, transactionId: string): Promise<SimPaymentRow | undefined> {
  const [row] = await sql.query<SimPaymentRow>(
    `SELECT * FROM sim_payments WHERE transaction_id = $1 AND kind = 'payment' AND direction = 'outbound' FOR UPDATE`,
    [transactionId],
  );
  return row;
}

export async function updatePayment(
  sql: Sql,
  endToEndId: string,
  change: { status: SimStatus; due_at?: Date | null; resolved_at?: Date | null; reason_code?: string | null },
): Promise<void> {
  await sql.query(
    `UPDATE sim_payments SET status = $2,
        due_at = CASE WHEN $3::boolean THEN $4::timestamptz ELSE due_at END,
        resolved_at = COALESCE($5::timestamptz, resolved_at),
        reason_code = COALESCE($6, reason_code)
      WHERE end_to_end_id = $1`,
    [endToEndId, change.status, change.due_at !== undefined, change.due_at ?? null, change.resolved_at ?? null, change.reason_code ?? null],
  );
}

/**
 * An incoming payment or return the receiving institution refused: rejected with its reason code
 * (a return also gives its amount back to what remains of the original payment). Idempotent: only
 * a row still settled changes.
 */
export async function refuseIncoming(sql: Sql, endToEndId: string, reasonCode: string, now: Date): Promise<void> {
  await sql.query(
    `WITH r AS (
       UPDATE sim_payments SET status = 'rejected', reason_code = $2, resolved_at = $3
        WHERE end_to_end_id = $1 AND direction = 'inbound' AND status = 'settled'
        RETURNING kind, original_end_to_end_id, amount)
     UPDATE sim_payments o SET returned_amount = o.returned_amount - r.amount
       FROM r WHERE r.kind = 'return' AND o.end_to_end_id = r.original_end_to_end_id`,
    [endToEndId, reasonCode, now],
  );
}

export async function addReturned(sql: Sql, endToEndId: string, amount: number): Promise<void> {
  await sql.query('UPDATE sim_payments SET returned_amount = returned_amount + $2 WHERE end_to_end_id = $1', [endToEndId, amount]);
}

/**
 * After the wall clock stepped back (or on start): due times and delivery leases written on the
 * clock before the step lie in the future by the step. Those beyond their longest legitimate length
 * (`dueHorizon`: the longest protection or settlement wait from now; `leaseHorizon`: the delivery
 * lease or the longest backoff from now) are due now. A notification released early is delivered
 * again at worst, which the service's inbox makes a no-op. Each is one probe of an index (or of a
 * short queue) when nothing lies beyond.
 */
export async function clampFutureDeadlines(sql: Sql, now: Date, dueHorizon: Date, leaseHorizon: Date): Promise<{ payments: number; notifications: number }> {
  const [row] = await sql.query<{ payments: number; notifications: number }>(
    `WITH p AS (
       UPDATE sim_payments SET due_at = $1 WHERE status IN ('protection', 'in_flight') AND due_at > $2 RETURNING 1),
     n AS (
       UPDATE sim_notifications SET locked_until = NULL WHERE locked_until > $3 RETURNING 1)
     SELECT (SELECT count(*) FROM p)::int AS payments, (SELECT count(*) FROM n)::int AS notifications`,
    [now, dueHorizon, leaseHorizon],
  );
  return row ?? { payments: 0, notifications: 0 };
}

/** Claims due work (protection waits and settlements) of this instant, locking the rows. */
export async function claimDuePayments(tx: Sql, now: Date, limit: number): Promise<SimPaymentRow[]> {
  return tx.query<SimPaymentRow>(
    `SELECT * FROM sim_payments
      WHERE status IN ('protection', 'in_flight') AND due_at <= $1
      ORDER BY due_at, end_to_end_id LIMIT $2
      FOR UPDATE SKIP LOCKED`,
    [now, limit],
  );
}

export async function enqueueNotification(
  sql: Sql,
  n: { notificationId: string; subject: string; kind: string; payload: Record<string, unknown>; createdAt: Date },
): Promise<void> {
  await sql.query(
    `INSERT INTO sim_notifications (notification_id, subject, kind, payload, created_at)
     VALUES ($1, $2, $3, $4::jsonb, $5) ON CONFLICT (notification_id) DO NOTHING`,
    [n.notificationId, n.subject, n.kind, JSON.stringify(n.payload), n.createdAt],
  );
}

/**
 * Leases up to `limit` notifications for delivery: the oldest undelivered one of each subject
 * (a later one waits until the earlier is delivered), skipping rows another process holds.
 */
export async function claimNotifications(sql: Sql, now: Date, leaseUntil: Date, limit: number): Promise<SimNotificationRow[]> {
  return sql.query<SimNotificationRow>(
    `WITH ${RELAXED_COMMIT}
     UPDATE sim_notifications SET locked_until = $2, attempts = attempts + 1
      WHERE (SELECT relaxed FROM relaxed_commit) IS NOT NULL AND id IN (
        SELECT n.id FROM sim_notifications n
         WHERE (n.locked_until IS NULL OR n.locked_until <= $1)
           AND NOT EXISTS (SELECT 1 FROM sim_notifications p WHERE p.subject = n.subject AND p.id < n.id)
         ORDER BY n.id LIMIT $3
         FOR UPDATE SKIP LOCKED)
      RETURNING id, notification_id, subject, kind, payload, created_at, attempts`,
    [now, leaseUntil, limit],
  );
}

/**
 * A leased notification, named by its row id and its notification id together: the id alone may
 * name another notification by the time its delivery ends. A failover loses the old primary's
 * unreplicated tail — a notification a delivery leased there (visible once committed locally, before
 * its standby confirmed) and the sequence values it took — and the new primary hands the same id to
 * the next notification (the HA run lost a sandbox decision so: its row deleted by the delivery of
 * a lost one). The notification id is unique and derived from what it reports.
 */
export interface LeasedNotification {
  id: number;
  notification_id: string;
}

/** Puts off a failed delivery until `until` (if the row is still the one leased). */
export async function deferNotification(sql: Sql, row: LeasedNotification, until: Date, error: string): Promise<void> {
  await sql.query('UPDATE sim_notifications SET locked_until = $3, last_error = $4 WHERE id = $1 AND notification_id = $2', [row.id, row.notification_id, until, error.slice(0, 500)]);
}

/** The stall switch: answers to payment and return orders delayed by `delay_ms`, or dropped. */
export interface RailStall {
  delay_ms: number;
  drop: boolean;
}

export async function readStall(sql: Sql): Promise<RailStall> {
  const [row] = await sql.query<RailStall>('SELECT delay_ms, drop_answer AS drop FROM sim_rail_stall WHERE id = 1');
  return row ?? { delay_ms: 0, drop: false };
}

export async function writeStall(sql: Sql, stall: RailStall, now: Date): Promise<RailStall> {
  const [row] = await sql.query<RailStall>(
    `INSERT INTO sim_rail_stall (id, delay_ms, drop_answer, updated_at) VALUES (1, $1, $2, $3)
     ON CONFLICT (id) DO UPDATE SET delay_ms = EXCLUDED.delay_ms, drop_answer = EXCLUDED.drop_answer, updated_at = EXCLUDED.updated_at
     RETURNING delay_ms, drop_answer AS drop`,
    [stall.delay_ms, stall.drop, now],
  );
  return row!;
}


/** A payment order as the rail takes it (`takeOutboundPayments`). */
export interface OutboundOrder {
  end_to_end_id: string;
  transaction_id: string;
  amount: number;
  payer_name: string;
  payer_document: string;
  payer_ispb: string;
  payer_account_id: number;
  receiver_key: string;
  description: string | null;
  txid: string | null;
}

/** What decides how an order is taken, the same for every order taken at one instant. */
export interface TakeTerms {
  created_at: Date;
  protectionDue: Date;
  settlementDue: Date;
  institutionIspb: string;
  refusals: { keyNotFound: string; sameInstitution: string };
}

export interface Taken {
  behavior: SimBehavior | null;
  /**
   * The acknowledgement of the order: the one it had when it was first taken (a repeat under the
   * same end-to-end id is answered the same, whatever became of the payment since); null when the
   * rail did not take it (a `timeout` key).
   */
  ack: 'accepted' | 'queued' | null;
  inserted: boolean;
  stall: RailStall;
}

/**
 * The common case of the engine in one statement: due outbound payments to a `settle` key, in
 * flight, are settled and their `payment.settled` notifications queued. Other due work (protection
 * waits ending, rejections, holds, returns) is left for `claimDuePayments`; `others` says whether
 * there is any among the rows looked at.
 *
 * A queued notification that is the only one of its subject is leased at once (until
 * `leaseUntil`, attempt 1; null: none is) and returned in `leased`: the caller delivers it
 * without claiming it (`claimNotifications`: a statement per batch less, and no scan of a queue
 * that fills with dead rows between two VACUUMs). One queued behind another of its subject is left
 * unleased (`unleased` counts them) for the claim, which keeps each subject in order.
 */
export async function settleDuePayments(
  sql: Sql,
  now: Date,
  limit: number,
  leaseUntil: Date | null,
): Promise<{ settled: number; others: number; unleased: number; leased: SimNotificationRow[] }> {
  const [row] = await sql.query<{ settled: number; others: number; unleased: number; leased: SimNotificationRow[] | null }>(
    `WITH ${RELAXED_COMMIT},
     due AS (
       SELECT end_to_end_id, kind, status, behavior, queued_by_protection FROM sim_payments
        WHERE status IN ('protection', 'in_flight') AND due_at <= $1
        ORDER BY due_at, end_to_end_id LIMIT $2 FOR UPDATE SKIP LOCKED),
     settled AS (
       UPDATE sim_payments p SET status = 'settled', due_at = NULL, resolved_at = $1
         FROM due WHERE p.end_to_end_id = due.end_to_end_id AND due.kind = 'payment' AND due.status = 'in_flight' AND due.behavior = 'settle'
       RETURNING p.end_to_end_id, due.queued_by_protection),
     -- Whether another notification of the subject waits: one probe of the subject index each (a
     -- scalar subquery, never a join over the whole queue). A payment protection held is never a
     -- head here: its payment.accepted may have committed after this statement's snapshot (the row
     -- locked here is then re-read in its new version, the queue is not), which made the settlement
     -- overtake it (the HA run: a commit waiting for the new primary's synchronous standby). The
     -- claim (claimNotifications) delivers it in order.
     heads AS MATERIALIZED (
       SELECT s.end_to_end_id,
              NOT s.queued_by_protection AND (SELECT 1 FROM sim_notifications p WHERE p.subject = s.end_to_end_id LIMIT 1) IS NULL AS head
         FROM settled s),
     queued AS (
       INSERT INTO sim_notifications (notification_id, subject, kind, payload, created_at, attempts, locked_until)
       SELECT 'payment.settled:' || end_to_end_id, end_to_end_id, 'payment.settled',
              jsonb_build_object('kind', 'payment.settled', 'endToEndId', end_to_end_id, 'settledAt', $3::text), $1,
              CASE WHEN head AND $4::timestamptz IS NOT NULL THEN 1 ELSE 0 END, CASE WHEN head THEN $4::timestamptz END
         FROM heads ORDER BY end_to_end_id
       ON CONFLICT (notification_id) DO NOTHING
       RETURNING id, notification_id, subject, kind, payload, created_at, attempts, locked_until)
     SELECT (SELECT count(*) FROM settled)::int AS settled, (SELECT count(*) FROM due)::int - (SELECT count(*) FROM settled)::int AS others,
            (SELECT count(*) FROM queued WHERE locked_until IS NULL)::int AS unleased,
            (SELECT json_agg(json_build_object('id', id, 'notification_id', notification_id, 'subject', subject, 'kind', kind,
                                               'payload', payload, 'created_at', created_at, 'attempts', attempts) ORDER BY id)
               FROM queued WHERE locked_until IS NOT NULL) AS leased
       FROM relaxed_commit`,
    [now, limit, now.toISOString(), leaseUntil],
  );
  const r = row!;
  const leased = (r.leased ?? []).map((n) => ({ ...n, id: Number(n.id), created_at: new Date(n.created_at) }));
  return { settled: r.settled, others: r.others, unleased: r.unleased, leased };
}

/** Deletes delivered notifications (each only if its row is still the one leased: `LeasedNotification`). */
export async function deleteNotifications(sql: Sql, rows: readonly LeasedNotification[]): Promise<void> {
  if (rows.length > 0) {
    await sql.query(
      `WITH ${RELAXED_COMMIT}
       DELETE FROM sim_notifications n USING unnest($1::bigint[], $2::text[]) AS d(id, notification_id)
        WHERE (SELECT relaxed FROM relaxed_commit) IS NOT NULL AND n.id = d.id AND n.notification_id = d.notification_id`,
      [rows.map((r) => r.id), rows.map((r) => r.notification_id)],
    );
  }
}

/**
 * Payment orders taken by the rail, in one statement, answered in the orders' order. For each, the
 * receiver's directory entry decides (no entry: rejected with `refusals.keyNotFound`; a key of the
 * paying institution: rejected with `refusals.sameInstitution`; `fraud_flagged`: queued by
 * protection until `protectionDue`, else in flight until `settlementDue`); a key with behaviour
 * `timeout` takes no new order. A payment is inserted unless its end-to-end id exists (the rail
 * deduplicates; an end-to-end id twice among the orders is one order: one payment, both answered
 * with it); the stall switch is read too. `inserted`: this statement took the payment (the caller
 * wakes its engine for when it is due). `ack` is the acknowledgement the payment had when it was
 * first taken (`queued` if protection held it then, whatever it is now), null when there is none.
 *
 * Its commit waits for the disk and the synchronous standby, as pixgate's own record of the
 * acknowledgement does: an acknowledgement is the central bank's word. With a relaxed commit a
 * primary already replaced by a failover (its postmaster killed, a backend still serving an open
 * connection) acknowledged orders that the new primary never had, while pixgate recorded them
 * there (the HA run's cash-out stuck at stage 2). The statements whose loss is harmless stay
 * relaxed: a lease taken again, a settlement done again, a delivered notification delivered again
 * (the service's inbox makes it a no-op).
 */
export async function takeOutboundPayments(sql: Sql, orders: readonly OutboundOrder[], t: TakeTerms): Promise<Taken[]> {
  const rows = await sql.query<{ behavior: SimBehavior | null; inserted: boolean | null; existing: boolean | null; delay_ms: number | null; drop: boolean | null }>(
    `WITH o AS MATERIALIZED (
       SELECT * FROM jsonb_to_recordset($1::jsonb) AS x(n int, end_to_end_id text, transaction_id text, amount bigint, payer_name text,
         payer_document text, payer_ispb text, payer_account_id bigint, receiver_key text, description text, txid text)),
     d AS MATERIALIZED (
       SELECT o.*, CASE WHEN e.key IS NULL THEN $4 WHEN e.ispb = $3 THEN $5 END AS refusal, e.name, e.document, e.ispb, e.behavior, e.fraud_flagged
         FROM o LEFT JOIN sim_dict_entries e ON e.key = o.receiver_key),
     ins AS (
       INSERT INTO sim_payments (end_to_end_id, kind, direction, transaction_id, amount, payer_name, payer_document, payer_ispb,
         payer_account_id, receiver_key, receiver_name, receiver_document, receiver_ispb, behavior, reason_code, status,
         queued_by_protection, description, txid, due_at, created_at)
       SELECT DISTINCT ON (d.end_to_end_id) d.end_to_end_id, 'payment', 'outbound', d.transaction_id, d.amount, d.payer_name, d.payer_document,
              d.payer_ispb, d.payer_account_id, d.receiver_key, d.name, d.document, COALESCE(d.ispb, '00000000'),
              CASE WHEN d.refusal IS NOT NULL THEN 'reject' ELSE d.behavior END, d.refusal,
              CASE WHEN d.fraud_flagged AND d.refusal IS NULL THEN 'protection' ELSE 'in_flight' END,
              d.fraud_flagged AND d.refusal IS NULL, d.description, d.txid, CASE WHEN d.fraud_flagged AND d.refusal IS NULL THEN $6::timestamptz ELSE $7::timestamptz END, $2::timestamptz
         FROM d WHERE d.behavior IS DISTINCT FROM 'timeout' ORDER BY d.end_to_end_id, d.n
       ON CONFLICT (end_to_end_id) DO NOTHING RETURNING end_to_end_id, queued_by_protection)
     -- The existing payment read by its key, one probe per order (a join let the planner pick a
     -- hash join over a sequential scan of the whole table while its statistics were young).
     -- Each answers whether the payment was queued by protection when first taken (NULL: not taken).
     SELECT d.behavior, i.queued_by_protection AS inserted,
            (SELECT p.queued_by_protection FROM sim_payments p WHERE p.end_to_end_id = d.end_to_end_id) AS existing,
            s.delay_ms, s.drop_answer AS drop
       FROM d LEFT JOIN ins i ON i.end_to_end_id = d.end_to_end_id
         LEFT JOIN sim_rail_stall s ON s.id = 1
      ORDER BY d.n`,
    [
      JSON.stringify(orders.map((o, n) => ({ ...o, n }))),
      t.created_at, t.institutionIspb, t.refusals.keyNotFound, t.refusals.sameInstitution, t.protectionDue, t.settlementDue,
    ],
  );
  if (rows.length !== orders.length) throw new Error(`rail: ${rows.length} answers for ${orders.length} payment orders`);
  const ackOf = (queuedByProtection: boolean | null | undefined): Taken['ack'] => (queuedByProtection == null ? null : queuedByProtection ? 'queued' : 'accepted');
  const taken = rows.map((row): Taken => ({
    behavior: row.behavior,
    ack: ackOf(row.inserted ?? row.existing),
    inserted: row.inserted !== null,
    stall: { delay_ms: row.delay_ms ?? 0, drop: row.drop ?? false },
  }));
  // Inserted concurrently by another statement that committed after this one's snapshot.
  const late = orders.filter((o, i) => taken[i]!.ack === null && taken[i]!.behavior !== 'timeout').map((o) => o.end_to_end_id);
  if (late.length > 0) {
    const found = new Map(
      (
        await sql.query<{ end_to_end_id: string; queued_by_protection: boolean }>(
          'SELECT end_to_end_id, queued_by_protection FROM sim_payments WHERE end_to_end_id = ANY($1::text[])',
          [late],
        )
      ).map((r) => [r.end_to_end_id, r.queued_by_protection]),
    );
    orders.forEach((o, i) => {
      if (taken[i]!.ack === null && taken[i]!.behavior !== 'timeout') taken[i]!.ack = ackOf(found.get(o.end_to_end_id));
    });
  }
  return taken;
}
