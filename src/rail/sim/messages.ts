import type { Sql } from '../../db/db.js';

/**
 * The simulator's notifications about payments, for reading (a transaction's timeline): each
 * message it queued for pixgate about these end-to-end ids (a payment, its returns, its
 * infractions: their subject is the payment's end-to-end id), oldest first, at most `limit`.
 */
export async function simulatorMessages(sql: Sql, endToEndIds: readonly string[], limit = 200): Promise<{ at: Date; kind: string; payload: Record<string, unknown> }[]> {
  if (endToEndIds.length === 0) return [];
  const rows = await sql.query<{ created_at: Date; kind: string; payload: Record<string, unknown> }>(
    'SELECT created_at, kind, payload FROM sim_notifications WHERE subject = ANY($1::text[]) ORDER BY id LIMIT $2',
    [endToEndIds, limit],
  );
  return rows.map((r) => ({ at: r.created_at, kind: r.kind, payload: r.payload }));
}
