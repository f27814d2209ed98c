import type { CashOutDeps } from '../deps.js';
import { LOCK_NOT_AVAILABLE, provesRollback, sqlState } from '../../db/db.js';
import { Batcher, batcherPer, onePer, type BatchOutcome } from '../../lib/batcher.js';
import { booksBusy, CASH_OUT_BATCH_LINGER_MS, CASH_OUT_BATCH_MAX, CASH_OUT_QUEUE_MAX, type LockMode, type Reserved, type ReserveRequest, type Settled } from './types.js';
import { reserveAssumed, reserveUnlocked } from './reserveUnread.js';
import { reserveIsolated } from './reserveLocked.js';
import { WaitLanes } from './lanes.js';

/** Step 1 of the cash-out in batches: concurrent cash-outs share one transaction. */

/**
 * Step 1 of a cash-out, coalesced with the concurrent cash-outs of this process, of any account
 * (group commit, as TigerBeetle batches; `Batcher`): one batch at a time, the requests that arrive
 * meanwhile go together to the next (up to CASH_OUT_BATCH_MAX, in arrival order). Each request
 * gets its own result — its record, its repeat, or its own cash-out error — once the transaction
 * committed. A hot account's concurrent debits become one lock and one commit; many accounts'
 * cash-outs share one commit. Across processes the accounts' row locks order the batches.
 */
const reserver = batcherPer((ctx: CashOutDeps) =>
  new Batcher<ReserveRequest, Reserved>({
    maxBatch: CASH_OUT_BATCH_MAX,
    lingerMs: CASH_OUT_BATCH_LINGER_MS,
    maxQueued: CASH_OUT_QUEUE_MAX,
    name: 'the cash-out queue',
    run: (items) => runBatch(ctx, items, 'skip'),
    observe: ctx.metrics.batchObserver('cash_out_reserve'),
  }),
);

export async function reserveInBatch(ctx: CashOutDeps, request: ReserveRequest): Promise<Settled> {
  const reserved = await reserver(ctx).submit(request);
  return 'later' in reserved ? reserved.later : reserved;
}


/**
 * Runs one batch: an outcome for every item. First, for the accounts this process knows, without a
 * read (`reserveAssumed`: one statement that writes if the account's figures let every item
 * through — the common case, one round trip); the other items without a transaction
 * (`reserveUnlocked`: one read, the checks, one statement that writes what the checks accepted
 * where nothing changed meanwhile — two round trips, the books locked only while the writing
 * statement runs); the items of the accounts that changed meanwhile (or all, if that statement
 * failed in the database) are then checked again and written under the locks (`reserveIsolated`:
 * one transaction, and if the database refuses it, one per account, then per item — one item's
 * refusal never fails the others).
 *
 * In `skip` mode the books of an account held elsewhere are not waited for: its items go to its
 * WaitLane (`later`), and so do the items of an account that already has one.
 */
async function runBatch(ctx: CashOutDeps, batch: ReserveRequest[], mode: LockMode): Promise<BatchOutcome<Reserved>[]> {
  const done = new Map<ReserveRequest, BatchOutcome<Reserved>>();
  const lanes = waitLanes(ctx);
  const items = mode === 'skip' ? batch.filter((item) => !lanes.has(item.caller.accountId)) : batch;
  const busy = new Set<number>();
  const free = (list: ReserveRequest[]) => (busy.size === 0 ? list : list.filter((item) => !busy.has(item.caller.accountId)));
  const unread = free(await reserveAssumed(ctx, items, done, mode, busy));
  let again: ReserveRequest[] = [];
  if (unread.length > 0) {
    try {
      const unlocked = await reserveUnlocked(ctx, unread, mode, busy);
      for (const [item, outcome] of unlocked.done) done.set(item, outcome);
      again = unlocked.again;
    } catch (err) {
      // The database refused the statement (an external_id taken meanwhile, a deadlock, a broken
      // invariant): it wrote nothing. Anything else (the connection lost, the server shutting
      // down: it may have committed) fails the batch, as a failed COMMIT would.
      if (!provesRollback(err, false)) throw err;
      ctx.log.debug({ err }, 'cash-out batch written under the locks instead');
      if (sqlState(err) === LOCK_NOT_AVAILABLE) for (const item of unread) busy.add(item.caller.accountId);
      again = unread;
    }
  }
  again = free(again);
  if (again.length > 0) {
    const started = performance.now();
    for (const [item, outcome] of await reserveIsolated(ctx, again, mode, busy)) done.set(item, outcome);
    lockedObserver(ctx)({ items: again.length, waitedMs: 0, ranMs: performance.now() - started });
  }
  // What is left: the items of accounts whose books were busy (or that have a lane already).
  return batch.map((item) => done.get(item) ?? (mode === 'skip' ? lanes.enqueue(item) : { ok: false, error: booksBusy() }));
}

/** The batches (or parts of batches) checked again under the locks (`pixgate_batch_*{batcher="cash_out_reserve_locked"}`). */
const lockedObserver = onePer((ctx: CashOutDeps) => ctx.metrics.batchObserver('cash_out_reserve_locked'));

/** The wait lanes of this process: their batches wait for the books (`runBatch` in `wait` mode). */
const waitLanes = onePer((ctx: CashOutDeps) => new WaitLanes((batch) => runBatch(ctx, batch, 'wait')));
