import type { Sql } from '../../db/db.js';
import { dayStart } from '../../db/partitions.js';

/**
 * Records a rail notification as applied; false when it already was (a redelivery). The inbox is
 * partitioned by the day of the notification's own time (`at`, the same on every redelivery;
 * migration 0910), so its id is unique within that day's partition.
 */
export async function recordNotification(tx: Sql, notificationId: string, kind: string, at: Date): Promise<boolean> {
  const rows = await tx.query(
    `INSERT INTO rail_inbox (notification_id, kind, notified_day) VALUES ($1, $2, $3)
     ON CONFLICT (notification_id, notified_day) DO NOTHING RETURNING notification_id`,
    [notificationId, kind, dayStart(at)],
  );
  return rows.length === 1;
}
