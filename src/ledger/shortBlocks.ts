import type { Sql } from '../db/db.js';

/**
 * What the ledger's credit rule (`coverShortBlocks` in ledger.ts) reads and writes of the MED
 * infractions: the open ones whose precautionary block is short of the amount claimed, and the
 * amount blocked. Everything else about an infraction is src/med/'s.
 */

/** Whether the account has an open infraction whose block is short (one probe of a partial index). */
export async function hasShortBlocks(sql: Sql, accountId: number): Promise<boolean> {
  const rows = await sql.query(
    `SELECT 1 FROM med_infractions WHERE account_id = $1 AND status IN ('OPEN', 'defense_submitted') AND blocked_amount < amount LIMIT 1`,
    [accountId],
  );
  return rows.length > 0;
}

/** Locks the account's open infractions whose block is short, oldest first. */
export async function lockShortBlocks(tx: Sql, accountId: number): Promise<{ id: string; amount: number; blocked_amount: number }[]> {
  return tx.query(
    `SELECT id, amount, blocked_amount FROM med_infractions
      WHERE account_id = $1 AND status IN ('OPEN', 'defense_submitted') AND blocked_amount < amount
      ORDER BY created_at, id FOR UPDATE`,
    [accountId],
  );
}

/** Adds `amount` to a locked infraction's block. */
export async function addBlocked(tx: Sql, infractionId: string, amount: number, now: Date): Promise<void> {
  await tx.query('UPDATE med_infractions SET blocked_amount = blocked_amount + $2, updated_at = $3 WHERE id = $1', [infractionId, amount, now]);
}
