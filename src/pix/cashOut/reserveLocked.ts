import * as repo from '../repository.js';
import type { CashOutDeps } from '../deps.js';
import { LOCK_NOT_AVAILABLE, provesRollback, sqlState, UNIQUE_VIOLATION, type Sql } from '../../db/db.js';
import { IdempotencyLostError } from '../../lib/idempotencyKey.js';
import type { BatchOutcome } from '../../lib/batcher.js';
import { limitWindows } from '../limits.js';
import type { OwnedTransaction } from '../repository.js';
import type { LockMode, Reserved, ReserveRequest } from './types.js';
import { remember } from './reserveUnread.js';
import { batchScope, decide } from './decide.js';

/** Step 1's strategy under the locks: one transaction per batch, split when the database refuses it. */

class LostClaims extends Error {
  constructor(readonly items: ReadonlySet<ReserveRequest>) {
    super('idempotency claims lost in a cash-out batch');
  }
}


/**
 * Runs items under the locks (`reserveLocked`), isolating what the database refuses: if the
 * transaction fails with an error that proves it wrote nothing (`provesRollback`), the items run
 * again in one transaction per account, then (one account) per item, so the item at fault gets its
 * own answer and the others are written. A lock timeout is not split (each part would wait again):
 * its accounts are busy. An item refused alone: its external_id taken by a writer that does not
 * lock the books (a charge) is answered as a repeat of that record (409 for another command);
 * any other refusal is its own error.
 */
export async function reserveIsolated(ctx: CashOutDeps, items: ReserveRequest[], mode: LockMode, busy: Set<number>): Promise<Map<ReserveRequest, BatchOutcome<Reserved>>> {
  try {
    return await reserveLocked(ctx, items, mode, busy);
  } catch (err) {
    if (!provesRollback(err, true)) throw err;
    if (sqlState(err) === LOCK_NOT_AVAILABLE) {
      for (const item of items) busy.add(item.caller.accountId);
      return new Map();
    }
    if (items.length === 1) return new Map([[items[0]!, await refusedAlone(ctx, items[0]!, err)]]);
    ctx.log.warn({ err, items: items.length }, 'cash-out batch refused by the database; its items run apart');
    const accounts = [...new Set(items.map((item) => item.caller.accountId))];
    const parts = accounts.length > 1 ? accounts.map((id) => items.filter((item) => item.caller.accountId === id)) : items.map((item) => [item]);
    const outcomes = new Map<ReserveRequest, BatchOutcome<Reserved>>();
    for (const part of parts) for (const [item, outcome] of await reserveIsolated(ctx, part, mode, busy)) outcomes.set(item, outcome);
    return outcomes;
  }
}

async function refusedAlone(ctx: CashOutDeps, item: ReserveRequest, err: unknown): Promise<BatchOutcome<Reserved>> {
  if (sqlState(err) === UNIQUE_VIOLATION && item.cmd.externalId !== null) {
    const existing = await repo.findByExternalId(ctx.db, item.caller.accountId, item.cmd.externalId);
    if (existing) return { ok: true, value: { sameAs: existing } };
  }
  return { ok: false, error: err };
}

/**
 * Runs items under the locks: an outcome for every item of an account that was not busy (a
 * transaction that fails fails them all; `reserveIsolated` splits it).
 */
async function reserveLocked(ctx: CashOutDeps, batch: ReserveRequest[], mode: LockMode, busy: Set<number>): Promise<Map<ReserveRequest, BatchOutcome<Reserved>>> {
  const lost = new Set<ReserveRequest>();
  for (;;) {
    const items = batch.filter((i) => !lost.has(i));
    let outcome = new Map<ReserveRequest, BatchOutcome<Reserved>>();
    let busyHere = new Set<number>();
    try {
      if (items.length > 0) ({ outcome, busy: busyHere } = await ctx.db.transaction((tx) => reserveBatch(tx, ctx, items, mode)));
    } catch (err) {
      // Those requests no longer own their key (a retry took it over): they fail, the others are
      // run again without them.
      if (!(err instanceof LostClaims)) throw err;
      for (const item of err.items) lost.add(item);
      continue;
    }
    for (const id of busyHere) busy.add(id);
    for (const item of lost) outcome.set(item, { ok: false, error: new IdempotencyLostError('the idempotency claim was lost') });
    return outcome;
  }
}

/**
 * The transaction of a batch under the locks: one statement locks the books of the batch's
 * accounts (in id order) and reads what the checks need (again, if it waited for a lock and read
 * a stale snapshot), the checks run here (`decide`), one statement writes the accepted ones. A
 * refused item leaves nothing behind and no savepoint is needed.
 */
async function reserveBatch(
  tx: Sql,
  ctx: CashOutDeps,
  all: readonly ReserveRequest[],
  mode: LockMode,
): Promise<{ outcome: Map<ReserveRequest, BatchOutcome<Reserved>>; busy: Set<number> }> {
  const now = ctx.clock.now();
  const windows = limitWindows(now);
  let [accountIds, externalIds] = batchScope(all);
  let locked = await (mode === 'skip' ? repo.lockFreeForCashOuts : repo.lockForCashOuts)(tx, accountIds, windows, externalIds);
  const { busy } = locked;
  const items = busy.size === 0 ? all : all.filter((item) => !busy.has(item.caller.accountId));
  if (locked.stale) {
    // Read again what the locks waited for (the books this transaction holds: nothing is skipped).
    [accountIds, externalIds] = batchScope(items);
    if (items.length > 0) locked = await repo.lockForCashOuts(tx, accountIds, windows, externalIds);
  }
  remember(ctx, locked.accounts);
  const decided = decide(ctx, items, locked.accounts, now, windows);
  const { accepted } = decided;
  let rows: OwnedTransaction[] = [];
  if (accepted.length > 0) {
    const written = await repo.insertCashOuts(
      tx,
      accepted.map((a) => a.record),
      windows,
    );
    rows = written.rows;
    const lost = new Set(accepted.filter((a) => a.record.claim !== null && !written.bound.has(a.record.claim.id)).map((a) => a.item));
    if (lost.size > 0) throw new LostClaims(lost);
    // A key without its claim in the open (a caller of its own) binds with its own statement.
    for (const [i, a] of accepted.entries()) if (a.item.key.claim === undefined) await a.item.key.bind(tx, rows[i]!.id);
  }
  return { outcome: new Map(items.map((item, i) => [item, decided.answer(i, rows)])), busy };
}
