import type { Sql } from '../db/db.js';
import { post } from '../ledger/ledger.js';

/**
 * The two moves every outbound order makes on its account's books: `reserve` (available -> pending,
 * at acceptance) and `release` (pending -> available, when it is rejected or fails).
 */
export async function movePending(
  tx: Sql,
  move: 'reserve' | 'release',
  input: { kind: string; reference: string; accountId: number; amount: number },
): Promise<void> {
  const sign = move === 'reserve' ? 1 : -1;
  await post(tx, {
    kind: input.kind,
    reference: input.reference,
    postings: [
      { book: { accountId: input.accountId, book: 'available' }, amount: -sign * input.amount },
      { book: { accountId: input.accountId, book: 'pending' }, amount: sign * input.amount },
    ],
  });
}
