import type { Sql } from '../../db/db.js';

/** Records a rail notification as applied; false when it already was (a redelivery). */
export async function recordNotification(tx: Sql, notificationId: string, kind: string): Promise<boolean> {
  const rows = await tx.query(
    'INSERT INTO rail_inbox (notification_id, kind) VALUES ($1, $2) ON CONFLICT (notification_id) DO NOTHING RETURNING notification_id',
    [notificationId, kind],
  );
  return rows.length === 1;
}
