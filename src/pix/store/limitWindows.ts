import type { Sql } from '../../db/db.js';

/**
 * The cash-out limit windows (table `cash_out_usage`): what an account sent in its current day
 * and night windows. Counted by the cash-out and the TEF under the account's books lock.
 */

export interface UsageWindow {
  kind: 'day' | 'night';
  start: Date;
}

/**
 * Adds (or, negative, takes back) an amount in each window and returns each window's total after
 * the change, by window kind. Runs under the account lock.
 */
export async function addUsage(tx: Sql, accountId: number, windows: readonly UsageWindow[], amount: number): Promise<Map<string, number>> {
  if (windows.length === 0) return new Map();
  const rows = await tx.query<{ window_kind: string; amount: number }>(
    `INSERT INTO cash_out_usage (account_id, window_kind, window_start, amount)
     SELECT $1, w.kind, w.start, GREATEST($4::bigint, 0) FROM unnest($2::text[], $3::timestamptz[]) AS w(kind, start)
     ON CONFLICT (account_id, window_kind, window_start)
     DO UPDATE SET amount = GREATEST(cash_out_usage.amount + $4::bigint, 0)
     RETURNING window_kind, amount`,
    [accountId, windows.map((w) => w.kind), windows.map((w) => w.start), amount],
  );
  return new Map(rows.map((r) => [r.window_kind, r.amount]));
}

/**
 * What the account has sent so far in each window, by window kind (absent: nothing). Under the
 * account lock, taken by an earlier statement of the transaction, so it reads every committed
 * change: check the limits on it, then `addUsage` (the database refuses a usage above the limit:
 * migration 0700).
 */
export async function usageIn(tx: Sql, accountId: number, windows: readonly UsageWindow[]): Promise<Map<string, number>> {
  if (windows.length === 0) return new Map();
  const rows = await tx.query<{ window_kind: string; amount: number }>(
    `SELECT u.window_kind, u.amount FROM cash_out_usage u JOIN unnest($2::text[], $3::timestamptz[]) AS w(kind, start)
        ON u.window_kind = w.kind AND u.window_start = w.start
      WHERE u.account_id = $1`,
    [accountId, ...windowParams(windows)],
  );
  return new Map(rows.map((r) => [r.window_kind, r.amount]));
}

/** The limit windows as the reads take them (`$2` kinds, `$3` starts). */
export function windowParams(windows: readonly UsageWindow[]): [string[], Date[]] {
  return [windows.map((w) => w.kind), windows.map((w) => w.start)];
}
