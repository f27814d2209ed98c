import type { Sql } from '../db/db.js';
import { moveWithinAccount } from '../ledger/ledger.js';

/**
 * The two moves every outbound order makes on its account's books: `reserve` (available -> pending,
 * at acceptance) and `release` (pending -> available, when it is rejected or fails). Money released
 * to the available book first tops up short MED blocks of the account (the ledger's credit
 * primitive does it).
 */
export async function movePending(
  tx: Sql,
  move: 'reserve' | 'release',
  input: { kind: string; reference: string; accountId: number; amount: number; now?: Date },
): Promise<void> {
  const [from, to] = move === 'reserve' ? (['available', 'pending'] as const) : (['pending', 'available'] as const);
  await moveWithinAccount(tx, { kind: input.kind, reference: input.reference, accountId: input.accountId, from, to, amount: input.amount, ...(input.now ? { now: input.now } : {}) });
}
