import type { Sql } from '../db/db.js';

/**
 * The deletes of the retention worker, one statement per batch. Each takes a cutoff (rows older
 * than it may go) and a batch size, and returns how many rows it removed. Every query keeps what
 * is still needed; see docs/decisions.md, "Bounds, retention and audit".
 */

/** Completed idempotency records whose 24-hour window ended before `cutoff`. In-progress claims stay. */
export async function purgeIdempotencyKeys(sql: Sql, cutoff: Date, batch: number): Promise<number> {
  const rows = await sql.query(
    `DELETE FROM idempotency_keys WHERE id IN (
       SELECT id FROM idempotency_keys WHERE expires_at <= $1 AND status = 'completed' ORDER BY expires_at LIMIT $2
     ) RETURNING 1`,
    [cutoff, batch],
  );
  return rows.length;
}

/**
 * Answers of Idempotency-Keys (idempotency_responses) in the default partition whose key expired
 * at or before `cutoff`; the daily partitions go whole (src/retention/partitions.ts).
 */
export async function purgeIdempotencyResponses(sql: Sql, cutoff: Date, batch: number): Promise<number> {
  const rows = await sql.query(
    `DELETE FROM idempotency_responses_default WHERE (key_id, expires_at) IN (
       SELECT key_id, expires_at FROM idempotency_responses_default WHERE expires_at <= $1 ORDER BY expires_at LIMIT $2
     ) RETURNING 1`,
    [cutoff, batch],
  );
  return rows.length;
}

/**
 * Ids of rail notifications applied before `cutoff` (the rail redelivers within minutes, not days)
 * that sit in the default partition of rail_inbox; the daily partitions go whole.
 */
export async function purgeRailInbox(sql: Sql, cutoff: Date, batch: number): Promise<number> {
  const rows = await sql.query(
    `DELETE FROM rail_inbox_default WHERE (notification_id, notified_day) IN (
       SELECT notification_id, notified_day FROM rail_inbox_default WHERE processed_at < $1 ORDER BY processed_at LIMIT $2
     ) RETURNING 1`,
    [cutoff, batch],
  );
  return rows.length;
}

/**
 * Outbox events written before `cutoff` that are dispatched and whose every delivery is final
 * (delivered, failed or cancelled), with those deliveries and their attempts, in one transaction.
 * An undispatched event or one with a pending delivery is never touched.
 */
export async function purgeEvents(tx: Sql, cutoff: Date, batch: number): Promise<number> {
  const events = await tx.query<{ id: number }>(
    `SELECT o.id FROM outbox_events o
      WHERE o.created_at < $1 AND NOT EXISTS (SELECT 1 FROM outbox_pending p WHERE p.id = o.id)
        AND NOT EXISTS (SELECT 1 FROM webhook_deliveries d WHERE d.outbox_id = o.id AND d.status = 'pending')
      ORDER BY o.id LIMIT $2 FOR UPDATE SKIP LOCKED`,
    [cutoff, batch],
  );
  if (events.length === 0) return 0;
  const ids = events.map((e) => e.id);
  await tx.query(
    `DELETE FROM webhook_attempts WHERE delivery_id IN (SELECT id FROM webhook_deliveries WHERE outbox_id = ANY($1::bigint[]))`,
    [ids],
  );
  await tx.query('DELETE FROM webhook_deliveries WHERE outbox_id = ANY($1::bigint[])', [ids]);
  await tx.query('DELETE FROM outbox_events WHERE id = ANY($1::bigint[])', [ids]);
  return ids.length;
}

/**
 * Simulated rail payments final (settled or rejected) before `cutoff` that no simulated infraction
 * refers to. Payments still in protection, in flight or held stay whatever their age.
 */
export async function purgeSimPayments(sql: Sql, cutoff: Date, batch: number): Promise<number> {
  const rows = await sql.query(
    `DELETE FROM sim_payments WHERE end_to_end_id IN (
       SELECT p.end_to_end_id FROM sim_payments p
        WHERE p.status IN ('settled', 'rejected') AND p.resolved_at IS NOT NULL AND p.resolved_at < $1
          AND NOT EXISTS (SELECT 1 FROM sim_infractions i WHERE i.end_to_end_id = p.end_to_end_id)
        ORDER BY p.resolved_at LIMIT $2
     ) RETURNING 1`,
    [cutoff, batch],
  );
  return rows.length;
}

/**
 * Cash-out limit windows (daily, nighttime) that started before `cutoff`: a window is at most a
 * day long, so one that started days ago counts for no limit any more.
 */
export async function purgeLimitWindows(sql: Sql, cutoff: Date, batch: number): Promise<number> {
  const rows = await sql.query(
    `DELETE FROM cash_out_usage WHERE (account_id, window_kind, window_start) IN (
       SELECT account_id, window_kind, window_start FROM cash_out_usage WHERE window_start < $1 ORDER BY window_start LIMIT $2
     ) RETURNING 1`,
    [cutoff, batch],
  );
  return rows.length;
}

/**
 * Signature-v2 nonce records past their expiry (src/auth/nonceStore.ts) in the default partition of
 * request_nonces; the daily partitions go whole once their day can no longer be signed.
 */
export async function purgeNonces(sql: Sql, now: Date, batch: number): Promise<number> {
  const rows = await sql.query(
    `DELETE FROM request_nonces_default WHERE (client_id, nonce, signed_day) IN (
       SELECT client_id, nonce, signed_day FROM request_nonces_default WHERE expires_at <= $1 ORDER BY expires_at LIMIT $2
     ) RETURNING 1`,
    [now, batch],
  );
  return rows.length;
}
