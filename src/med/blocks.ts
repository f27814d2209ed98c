import type { Sql } from '../db/db.js';
import { moveWithinAccount } from '../ledger/ledger.js';

/**
 * The precautionary blocks of MED. A block is money moved from the account's `available` book to
 * its `blocked` book (so it no longer counts in the safe balance that cash-outs and refunds must fit
 * in), recorded on its infraction as `blocked_amount`. The ledger reference of every block and
 * release is the infraction id.
 *
 * When the available balance is short of what an infraction claims, what is there is blocked and
 * the rest is blocked as money comes in. That top-up is the ledger's own credit rule
 * (`coverShortBlocks` in src/ledger/ledger.ts): `post` applies it after every posting that credits
 * an account's available book, in the same transaction (received PIX and paid charges, returned
 * payouts, released reservations, deposits, boleto settlements, released MED blocks, and any credit
 * path added later), oldest infraction first, until each block holds its amount. Credit paths do
 * not call it themselves; the one direct caller is the creation of an infraction (the block itself).
 */
export { coverShortBlocks } from '../ledger/ledger.js';

/**
 * available -> blocked (`block`) or blocked -> available (`release`). `reference`: the infraction
 * id for blocks and releases, the MED refund's transaction_id when its return fails.
 */
export async function moveBlock(
  tx: Sql,
  move: 'block' | 'release',
  input: { kind: string; reference: string; accountId: number; amount: number; now?: Date },
): Promise<void> {
  const [from, to] = move === 'block' ? (['available', 'blocked'] as const) : (['blocked', 'available'] as const);
  await moveWithinAccount(tx, { kind: input.kind, reference: input.reference, accountId: input.accountId, from, to, amount: input.amount, ...(input.now ? { now: input.now } : {}) });
}
