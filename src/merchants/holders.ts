import type { Sql } from '../db/db.js';
import type { AccountRow } from './repository.js';

/** An account with its holder's name and document (the payer of its cash-outs). */
export type AccountWithHolder = AccountRow & { holder_name: string; holder_document: string };

export async function accountWithHolder(sql: Sql, accountId: number): Promise<AccountWithHolder> {
  const [row] = await sql.query<AccountWithHolder>(
    `SELECT a.*, m.name AS holder_name, m.document AS holder_document FROM accounts a JOIN merchants m ON m.id = a.merchant_id WHERE a.id = $1`,
    [accountId],
  );
  if (!row) throw new Error(`account ${accountId} not found`);
  return row;
}
