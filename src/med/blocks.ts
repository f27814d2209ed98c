import type { Sql } from '../db/db.js';
import { lockAccount, moveWithinAccount } from '../ledger/ledger.js';
import * as repo from './repository.js';

/**
 * The precautionary blocks of MED. A block is money moved from the account's `available` book to
 * its `blocked` book (so it no longer counts in the safe balance that cash-outs and refunds must fit
 * in), recorded on its infraction as `blocked_amount`. The ledger reference of every block and
 * release is the infraction id.
 *
 * When the available balance is short of what an infraction claims, what is there is blocked and
 * the rest is blocked as money comes in: the ledger's `post` calls `coverShortBlocks` after every
 * posting that credits an account's available book, in the same transaction (received PIX and paid
 * charges, returned payouts, released reservations, deposits, boleto settlements, released MED
 * blocks, and any credit path added later), which tops up the account's short blocks, oldest
 * infraction first, until each holds its amount. Credit paths do not call it themselves; the one
 * direct caller is the creation of an infraction (the block itself).
 */

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

/**
 * Tops up the account's open blocks that are short of their amount from its available balance,
 * oldest infraction first, in the caller's transaction. Costs one index probe when there is none
 * (nearly always); otherwise locks the account's books, then the infractions (the fixed order).
 */
export async function coverShortBlocks(tx: Sql, accountId: number, now: Date): Promise<void> {
  if (!(await repo.hasShortBlocks(tx, accountId))) return;
  let { available } = await lockAccount(tx, accountId);
  for (const infraction of await repo.lockShortBlocks(tx, accountId)) {
    if (available <= 0) return;
    const take = Math.min(available, infraction.amount - infraction.blocked_amount);
    await moveBlock(tx, 'block', { kind: 'med_block', reference: infraction.id, accountId, amount: take });
    await repo.updateInfraction(tx, infraction.id, { blockedDelta: take }, now);
    available -= take;
  }
}
