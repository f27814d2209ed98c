import { randomUUID } from 'node:crypto';
import type { AppContext } from '../context.js';
import { LOCK_NOT_AVAILABLE, provesRollback, sqlState, UNIQUE_VIOLATION, type Sql } from '../db/db.js';
import { outboxBody } from '../events/outbox.js';
import { IdempotencyLostError, type IdempotencyBinding } from '../external/idempotency.js';
import { Batcher, batcherPer, onePer, OverloadedError, type BatchOutcome } from '../lib/batcher.js';
import { lockAccount, toBalances } from '../ledger/ledger.js';
import { newEndToEndId, newTransactionId, TX_PREFIX } from '../lib/ids.js';
import { addMoney, centsToBaseUnits } from '../lib/money.js';
import * as merchants from '../merchants/repository.js';
import type { DirectoryEntry, PaymentAck, PaymentOrder } from '../rail/rail.js';
import { TX_STATUS } from '../transactions/repository.js';
import { cashOutError } from './cashOutErrors.js';
import type { CashOutCommand } from './cashOutCommand.js';
import { emitFor, payoutBody } from './events.js';
import { limitProblem, limitWindows } from './limits.js';
import { movePending } from './postings.js';
import * as repo from './repository.js';
import type { OwnedTransaction, UsageWindow } from './repository.js';

/**
 * POST /pix/cash-out, in three steps, each atomic (one statement or one transaction), and the rail
 * call between them (never inside a transaction):
 *
 *   1 reserve   external_id, limits and safe balance checks; the record (stage 1, payment_status
 *               processing) and the reservation available -> pending — one statement that
 *               writes if the account's figures and configuration let it through (for an account
 *               this process has read before), else a read and one statement that writes if the
 *               account did not change meanwhile (else under the account lock), shared by the
 *               concurrent cash-outs of this process (a batch: reserveInBatch); an account whose
 *               books are held elsewhere waits apart (WaitLanes) and one item the database refuses
 *               fails alone (reserveIsolated)
 *   2 send      rail.sendPayment (idempotent on the end-to-end id)
 *   3 record    the rail's answer: accepted (stage 2, pix.payout.processing, HTTP 200) or queued
 *               (stage 2, pix.payout.queued, HTTP 202), with the idempotency answer; or timeout
 *               (reservation released, failed and resumable, HTTP 400 provider_timeout)
 *
 * A crash between 1 and 3 leaves a stage-1 record: the recovery worker sends it again, and a repeat
 * of the request (same external_id, or same Idempotency-Key: step 1 binds the key to the record in
 * the record's own transaction) resumes it. Outcomes arrive later as rail notifications
 * (payouts.ts).
 */

export interface CashOutCaller {
  merchantId: number;
  accountId: number;
}

/** Records the HTTP answer in the operation's final transaction (idempotency). */
export type RecordAnswer = (tx: Sql, statusCode: number, body: CashOutResponse) => Promise<void>;

/** The request's Idempotency-Key: bound to the record in step 1, resumed on a retry. */
export type CashOutKey = Pick<IdempotencyBinding, 'resumes' | 'bind' | 'claim' | 'prepare'> & { record: RecordAnswer };

export interface CashOutResponse {
  worked: boolean;
  final: boolean;
  transaction_id: string;
  end_to_end_id: string;
  external_id: string | null;
  amount: number;
  fee_amount: number;
  net_amount: number;
  status: string;
  detail: string;
}

export interface CashOutAnswer {
  statusCode: number;
  body: CashOutResponse;
}

const DETAIL: Record<string, string> = {
  accepted: 'Cash-out accepted for processing; the outcome follows as pix.payout.confirmed or pix.payout.failed',
  queued: 'Cash-out queued by a protection rule; it is reprocessed automatically',
  settled: 'Cash-out settled',
  rejected: 'Cash-out rejected by the central bank',
  returned: 'Cash-out settled and returned by the receiver',
  failed: 'Cash-out failed',
};

/** The cash-out response of a record as it stands (spec table "Cash-out response"). */
export function cashOutAnswer(row: OwnedTransaction): CashOutAnswer {
  const status =
    row.stage < 3 ? (row.payment_status === 'queued' ? 'queued' : 'accepted') : row.payment_status === 'returned' ? 'settled' : (row.payment_status ?? 'failed');
  return {
    statusCode: status === 'queued' ? 202 : 200,
    body: {
      worked: true,
      final: row.stage === 3,
      transaction_id: row.transaction_id,
      end_to_end_id: row.end_to_end_id!,
      external_id: row.external_id,
      amount: row.amount,
      fee_amount: row.fee_amount,
      net_amount: addMoney(row.amount, row.fee_amount),
      status,
      detail: DETAIL[status] ?? DETAIL.failed!,
    },
  };
}

export async function cashOut(ctx: AppContext, caller: CashOutCaller, cmd: CashOutCommand, key: CashOutKey): Promise<CashOutAnswer> {
  if (key.resumes !== null) {
    // An earlier attempt under this Idempotency-Key created the order: continue it, create none.
    const bound = await repo.findById(ctx.db, key.resumes);
    if (bound && bound.kind === 'cash_out' && bound.account_id === caller.accountId) return resume(ctx, bound, key);
  }
  let destination;
  try {
    destination = await resolveDestination(ctx, caller, cmd.key);
  } catch (err) {
    // A repeated command answers with its original order even if its key has changed since.
    const existing = cmd.externalId === null ? undefined : await repo.findByExternalId(ctx.db, caller.accountId, cmd.externalId);
    if (existing) return repeat(ctx, existing, cmd, key);
    throw err;
  }
  const reserved = await reserveInBatch(ctx, { caller, cmd, key, destination });
  if ('existingId' in reserved) {
    const existing = await repo.findById(ctx.db, reserved.existingId);
    if (!existing) throw new Error(`transaction ${reserved.existingId} disappeared`);
    return repeat(ctx, existing, cmd, key);
  }
  if ('sameAs' in reserved) return repeat(ctx, reserved.sameAs, cmd, key);
  return submit(ctx, reserved.row, key);
}

// ---- step 1 in batches: concurrent cash-outs share one transaction ----

/**
 * Most cash-outs a batch takes (one transaction, one lock of each account's books). A batch of 64
 * writes 64 records and 128 ledger entries in one statement — a few milliseconds — while keeping
 * the locks short for other processes and the answer of the first request close.
 */
export const CASH_OUT_BATCH_MAX = 64;
/**
 * Under load, a reserve batch that follows another waits this long for more cash-outs
 * (`BatcherOptions.lingerMs`): measured with WEB_CONCURRENCY=2 on 2 cores, batches of 7 became
 * 11 and throughput rose about a fifth (docs/decisions.md). A lone cash-out never waits.
 */
export const CASH_OUT_BATCH_LINGER_MS = 2;

interface ReserveRequest {
  caller: CashOutCaller;
  cmd: CashOutCommand;
  key: CashOutKey;
  destination: DirectoryEntry;
}

type Settled = { row: OwnedTransaction } | { existingId: string } | { sameAs: OwnedTransaction };
/** A batch's answer for an item: settled, or `later` when its account's books were busy (WaitLanes). */
type Reserved = Settled | { later: Promise<Settled> };

/**
 * Most cash-outs waiting for a reserve batch in this process (`BatcherOptions.maxQueued`), and as
 * many for their step 3: past it a request is answered 503 with Retry-After at once.
 */
export const CASH_OUT_QUEUE_MAX = 16 * CASH_OUT_BATCH_MAX;
/** Accounts whose books were busy that may have cash-outs waiting for them at once (WaitLanes). */
export const WAIT_LANES_MAX = 64;
/** Of those, how many wait for their books at once (each holds a database connection meanwhile). */
export const WAIT_LANES_RUNNING = 4;
/** Cash-outs that may wait behind one account's busy books (besides those already waiting). */
export const WAIT_LANE_MAX = CASH_OUT_BATCH_MAX;

/**
 * Step 1 of a cash-out, coalesced with the concurrent cash-outs of this process, of any account
 * (group commit, as TigerBeetle batches; `Batcher`): one batch at a time, the requests that arrive
 * meanwhile go together to the next (up to CASH_OUT_BATCH_MAX, in arrival order). Each request
 * gets its own result — its record, its repeat, or its own cash-out error — once the transaction
 * committed. A hot account's concurrent debits become one lock and one commit; many accounts'
 * cash-outs share one commit. Across processes the accounts' row locks order the batches.
 */
const reserver = batcherPer((ctx: AppContext) =>
  new Batcher<ReserveRequest, Reserved>({
    maxBatch: CASH_OUT_BATCH_MAX,
    lingerMs: CASH_OUT_BATCH_LINGER_MS,
    maxQueued: CASH_OUT_QUEUE_MAX,
    name: 'the cash-out queue',
    run: (items) => runBatch(ctx, items, 'skip'),
    observe: ctx.metrics.batchObserver('cash_out_reserve'),
  }),
);

async function reserveInBatch(ctx: AppContext, request: ReserveRequest): Promise<Settled> {
  const reserved = await reserver(ctx).submit(request);
  return 'later' in reserved ? reserved.later : reserved;
}

/**
 * How a batch takes its accounts' books: `skip` — never waiting long for one account: the
 * one-statement writes wait at most RESERVE_LOCK_WAIT_MS (a batch of another process holds them a
 * few milliseconds) and then take only those free (SKIP LOCKED), the transaction under the locks
 * takes only those free; the items of an account held elsewhere (a long MED transaction) go to its
 * WaitLane, so that one busy account never holds up the others' cash-outs; `wait` — waiting for
 * them, up to the lock timeout (a WaitLane's batch: one account).
 */
type LockMode = 'skip' | 'wait';

/** The answer to a cash-out whose account's books stayed busy past the lock timeout, or whose wait queue is full. */
const booksBusy = () => new OverloadedError("the account's balance is held by another operation; retry shortly", 1);

interface LaneItem {
  item: ReserveRequest;
  resolve: (value: Settled) => void;
  reject: (err: unknown) => void;
}

/**
 * The cash-outs of accounts whose books a batch found held elsewhere, one lane per account: the
 * lane runs them in batches of their own that wait for the books (`runBatch` in `wait` mode), in
 * arrival order; while it has items, the account's new cash-outs queue behind them (so an
 * account's cash-outs are still decided in arrival order). Bounded: WAIT_LANES_MAX lanes,
 * WAIT_LANE_MAX items waiting in each and WAIT_LANES_RUNNING waiting for their books at once;
 * past a bound the request is answered 503 with Retry-After (OverloadedError).
 */
class WaitLanes {
  private readonly lanes = new Map<number, LaneItem[]>();
  private readonly ready: number[] = [];
  private running = 0;

  constructor(private readonly ctx: AppContext) {}

  has(accountId: number): boolean {
    return this.lanes.has(accountId);
  }

  enqueue(item: ReserveRequest): BatchOutcome<Reserved> {
    const id = item.caller.accountId;
    let lane = this.lanes.get(id);
    if (!lane) {
      if (this.lanes.size >= WAIT_LANES_MAX) return { ok: false, error: booksBusy() };
      this.lanes.set(id, (lane = []));
      this.ready.push(id);
    }
    if (lane.length >= WAIT_LANE_MAX) return { ok: false, error: booksBusy() };
    const queue = lane;
    const later = new Promise<Settled>((resolve, reject) => queue.push({ item, resolve, reject }));
    later.catch(() => {}); // awaited by its request (reserveInBatch); never unhandled meanwhile
    this.pump();
    return { ok: true, value: { later } };
  }

  private pump(): void {
    while (this.running < WAIT_LANES_RUNNING && this.ready.length > 0) {
      const id = this.ready.shift()!;
      this.running++;
      void this.drain(id).finally(() => {
        this.running--;
        this.pump();
      });
    }
  }

  private async drain(accountId: number): Promise<void> {
    const lane = this.lanes.get(accountId)!;
    try {
      while (lane.length > 0) {
        const batch = lane.splice(0, CASH_OUT_BATCH_MAX);
        let outcomes: BatchOutcome<Reserved>[];
        try {
          outcomes = await runBatch(this.ctx, batch.map((w) => w.item), 'wait');
        } catch (err) {
          outcomes = batch.map(() => ({ ok: false, error: err }));
        }
        batch.forEach((w, i) => {
          const o = outcomes[i]!;
          if (!o.ok) w.reject(o.error);
          else if ('later' in o.value) w.reject(new Error('a waiting cash-out was deferred again'));
          else w.resolve(o.value);
        });
      }
    } finally {
      this.lanes.delete(accountId);
    }
  }
}

const waitLanes = onePer((ctx: AppContext) => new WaitLanes(ctx));

class LostClaims extends Error {
  constructor(readonly items: ReadonlySet<ReserveRequest>) {
    super('idempotency claims lost in a cash-out batch');
  }
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
async function runBatch(ctx: AppContext, batch: ReserveRequest[], mode: LockMode): Promise<BatchOutcome<Reserved>[]> {
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
const lockedObserver = onePer((ctx: AppContext) => ctx.metrics.batchObserver('cash_out_reserve_locked'));

/**
 * The configuration (fee, limits, holder) of the accounts whose cash-outs this process has read,
 * by account id: a batch of known accounts is decided on it without a read (`reserveAssumed`). Never
 * trusted on its own — the writing statement compares it with the account's row — so nothing has
 * to tell this process that an account changed: a stale entry costs the read it saves, and the
 * read refreshes it.
 */
const knownAccounts = onePer((_ctx: AppContext) => new Map<number, repo.CashOutAccountConfig>());
const KNOWN_ACCOUNTS_MAX = 10_000;
/** The available balance a batch decided without a read assumes: the statement checks the real one. */
const UNLIMITED = Number.MAX_SAFE_INTEGER;

function remember(ctx: AppContext, accounts: ReadonlyMap<number, repo.CashOutLockState>): void {
  const known = knownAccounts(ctx);
  if (known.size + accounts.size > KNOWN_ACCOUNTS_MAX) known.clear();
  for (const [id, a] of accounts) {
    known.set(id, {
      merchant_id: a.merchant_id,
      cash_out_fee_cents: a.cash_out_fee_cents,
      cash_out_max_amount_cents: a.cash_out_max_amount_cents,
      cash_out_daily_limit_cents: a.cash_out_daily_limit_cents,
      cash_out_nighttime_limit_cents: a.cash_out_nighttime_limit_cents,
      holder_name: a.holder_name,
      holder_document: a.holder_document,
    });
  }
}

/**
 * Step 1 without a read, for the items of accounts this process knows (`knownAccounts`): the
 * checks run on the remembered configuration as if the balance had no end and no window had been
 * used, and ONE statement writes the items of each account where every item was accepted, if the
 * figures under the locks still let all of them through and the account's row is still the one
 * remembered (`reserveCashOutsIfUnchanged` with `config`). Done items are put in `done`; the others
 * are returned, in batch order, for the read (`reserveUnlocked`): those of unknown accounts, of
 * accounts with a refusal, a repeat or a key that binds with a statement of its own, and of accounts
 * whose figures or configuration said no. So a refusal is always made on a read, with its figures.
 */
async function reserveAssumed(
  ctx: AppContext,
  items: ReserveRequest[],
  done: Map<ReserveRequest, BatchOutcome<Reserved>>,
  mode: LockMode,
  busy: Set<number>,
): Promise<ReserveRequest[]> {
  const known = knownAccounts(ctx);
  // Whole accounts only, so that the items of one account are still decided in arrival order: an
  // account with a key that binds with a statement of its own goes the transactional way.
  const bindsAlone = new Set(items.filter((i) => i.key.claim === undefined).map((i) => i.caller.accountId));
  const mine = items.filter((i) => known.has(i.caller.accountId) && !bindsAlone.has(i.caller.accountId));
  if (mine.length === 0) return items;
  const now = ctx.clock.now();
  const windows = limitWindows(now);
  const states = new Map<number, repo.CashOutLockState>();
  for (const { caller } of mine) {
    const id = caller.accountId;
    if (!states.has(id)) states.set(id, { ...known.get(id)!, account_id: id, books: [{ book: 'available', balance: UNLIMITED }], usage: {}, existing: {} });
  }
  const decided = decide(ctx, mine, states, now, windows);
  const held = new Set<number>();
  for (const [i, item] of mine.entries()) if (!decided.created(i)) held.add(item.caller.accountId);
  const accepted = decided.accepted.filter((a) => !held.has(a.item.caller.accountId));
  if (accepted.length === 0) return items;
  const going = [...new Set(accepted.map((a) => a.item.caller.accountId))];
  const checked = going.map((id) => ({ ...checkedAccount(states.get(id)!, false, decided, windows), config: known.get(id)! }));
  let written: { rows: OwnedTransaction[]; unchanged: Set<number>; busy: Set<number> };
  try {
    written = await repo.reserveCashOutsIfUnchanged(
      ctx.db,
      accepted.map((a) => a.record),
      windows,
      checked,
      { brief: mode === 'skip' },
    );
  } catch (err) {
    // As in runBatch: refused by the database, it wrote nothing; the read decides again.
    if (!provesRollback(err, false)) throw err;
    ctx.log.debug({ err }, 'cash-out batch decided on a read instead');
    if (sqlState(err) === LOCK_NOT_AVAILABLE) for (const id of going) busy.add(id);
    return items;
  }
  for (const id of written.busy) busy.add(id);
  const rows = decided.rowsOf(written.rows);
  const position = new Map(mine.map((item, i) => [item, i]));
  const rest: ReserveRequest[] = [];
  for (const item of items) {
    const i = position.get(item);
    const account = item.caller.accountId;
    if (i !== undefined && !held.has(account) && written.unchanged.has(account)) done.set(item, decided.answer(i, rows));
    else rest.push(item);
  }
  return rest;
}

async function reserveUnlocked(
  ctx: AppContext,
  items: ReserveRequest[],
  mode: LockMode,
  busy: Set<number>,
): Promise<{ done: Map<ReserveRequest, BatchOutcome<Reserved>>; again: ReserveRequest[] }> {
  const now = ctx.clock.now();
  const windows = limitWindows(now);
  const [accountIds, externalIds] = batchScope(items);
  const read = await repo.readForCashOuts(ctx.db, accountIds, windows, externalIds);
  remember(ctx, read.accounts);
  const decided = decide(ctx, items, read.accounts, now, windows);
  // Accounts with an item accepted: written if unchanged. An accepted item whose key binds with a
  // statement of its own (no claim in the open) needs a transaction: its account goes under the locks.
  const toWrite = new Set<number>();
  const locked = new Set<number>();
  for (const { item } of decided.accepted) (item.key.claim === undefined ? locked : toWrite).add(item.caller.accountId);
  for (const id of locked) toWrite.delete(id);
  const accepted = decided.accepted.filter((a) => toWrite.has(a.item.caller.accountId));
  let written = { rows: [] as OwnedTransaction[], unchanged: new Set<number>(), busy: new Set<number>() };
  if (accepted.length > 0) {
    const refusing = new Set(items.filter((item, i) => decided.refused(i)).map((item) => item.caller.accountId));
    const checked = [...toWrite].map((id) => checkedAccount(read.accounts.get(id)!, refusing.has(id), decided, windows));
    written = await repo.reserveCashOutsIfUnchanged(
      ctx.db,
      accepted.map((a) => a.record),
      windows,
      checked,
      { brief: mode === 'skip' },
    );
  }
  for (const id of written.busy) busy.add(id);
  const rows = decided.rowsOf(written.rows);
  const done = new Map<ReserveRequest, BatchOutcome<Reserved>>();
  const again: ReserveRequest[] = [];
  for (const [i, item] of items.entries()) {
    const account = item.caller.accountId;
    if (locked.has(account) || (toWrite.has(account) && !written.unchanged.has(account))) again.push(item);
    else done.set(item, decided.answer(i, rows));
  }
  return { done, again };
}

/** What must still hold of an account, under the locks, for the checks its items passed on the read. */
function checkedAccount(state: repo.CashOutLockState, refused: boolean, decided: Decided, windows: readonly repo.UsageWindow[]): repo.CheckedAccount {
  const id = state.account_id;
  if (refused) return { account_id: id, exact: true, available: toBalances(state.books).safe, usage: state.usage ?? {} };
  let debit = 0;
  let amount = 0;
  for (const { record } of decided.accepted) {
    if (record.account_id !== id) continue;
    debit = addMoney(debit, addMoney(record.amount, record.fee_amount));
    amount = addMoney(amount, record.amount);
  }
  const limit = (kind: string) => centsToBaseUnits(kind === 'night' ? state.cash_out_nighttime_limit_cents : state.cash_out_daily_limit_cents);
  return { account_id: id, exact: false, debit, caps: Object.fromEntries(windows.map((w) => [w.kind, limit(w.kind) - amount])) };
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
async function reserveIsolated(ctx: AppContext, items: ReserveRequest[], mode: LockMode, busy: Set<number>): Promise<Map<ReserveRequest, BatchOutcome<Reserved>>> {
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

async function refusedAlone(ctx: AppContext, item: ReserveRequest, err: unknown): Promise<BatchOutcome<Reserved>> {
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
async function reserveLocked(ctx: AppContext, batch: ReserveRequest[], mode: LockMode, busy: Set<number>): Promise<Map<ReserveRequest, BatchOutcome<Reserved>>> {
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

/** The accounts of a batch (in id order) and the external_ids it names, each with its account. */
function batchScope(items: readonly ReserveRequest[]): [number[], repo.ExternalIdRef[]] {
  const accountIds = [...new Set(items.map((i) => i.caller.accountId))].sort((a, b) => a - b);
  const seen = new Set<string>();
  const externalIds: repo.ExternalIdRef[] = [];
  for (const i of items) {
    if (i.cmd.externalId === null) continue;
    const ref = { accountId: i.caller.accountId, externalId: i.cmd.externalId };
    const key = `${ref.accountId}:${ref.externalId}`;
    if (seen.has(key)) continue;
    seen.add(key);
    externalIds.push(ref);
  }
  return [accountIds, externalIds];
}

/** The figures of one account the checks of a batch run against (running balance and usage). */
interface AccountRun {
  state: repo.CashOutLockState;
  safe: number;
  used: Map<string, number>;
  /** external_id -> position in `accepted` of this batch's first record with it. */
  firstAccepted: Map<string, number>;
}

interface Decided {
  /** The records to write, in item order. */
  accepted: { record: repo.NewCashOut; item: ReserveRequest }[];
  /** The outcome of item `i`, given the written row of each accepted record (by position). */
  answer(i: number, rows: readonly (OwnedTransaction | undefined)[]): BatchOutcome<Reserved>;
  /** Whether item `i` was refused by a check (balance, limit). */
  refused(i: number): boolean;
  /** Whether item `i` is a new record of this batch (not refused, not a repeat). */
  created(i: number): boolean;
  /** The written rows (any order, some accepted records possibly not written) by position in `accepted`, for `answer`. */
  rowsOf(written: readonly OwnedTransaction[]): (OwnedTransaction | undefined)[];
}

/**
 * The checks of a batch, in item order, against each account's running balance and running limit
 * usage as `accounts` gives them: a repeat of an external_id already taken (before, or by an
 * earlier item of this batch) is a repeat; a limit or balance refusal is the item's own cash-out
 * error; the others are accepted, with their records. All checks of an item precede its writes.
 */
function decide(ctx: AppContext, items: readonly ReserveRequest[], accounts: Map<number, repo.CashOutLockState>, now: Date, windows: repo.UsageWindow[]): Decided {
  const runs = new Map<number, AccountRun>();
  for (const [id, state] of accounts) {
    runs.set(id, { state, safe: toBalances(state.books).safe, used: new Map(Object.entries(state.usage ?? {})), firstAccepted: new Map() });
  }
  const accepted: { record: repo.NewCashOut; item: ReserveRequest }[] = [];
  const outcome: (BatchOutcome<Reserved> | { accepted: number })[] = [];
  for (const item of items) {
    const { cmd, destination } = item;
    const run = runs.get(item.caller.accountId)!;
    const { state } = run;
    if (cmd.externalId !== null) {
      const id = state.existing?.[cmd.externalId];
      if (id !== undefined) {
        outcome.push({ ok: true, value: { existingId: id } });
        continue;
      }
      const first = run.firstAccepted.get(cmd.externalId);
      if (first !== undefined) {
        outcome.push({ accepted: -1 - first }); // a repeat of an earlier item of this batch
        continue;
      }
    }
    try {
      const limits = {
        maxAmountCents: state.cash_out_max_amount_cents,
        dailyLimitCents: state.cash_out_daily_limit_cents,
        nighttimeLimitCents: state.cash_out_nighttime_limit_cents,
      };
      const fee = centsToBaseUnits(state.cash_out_fee_cents);
      const amount = centsToBaseUnits(cmd.amountCents);
      const problem = limitProblem(amount, limits, windows, run.used);
      if (problem) throw cashOutError(problem.code, { detail: problem.detail });
      const debit = addMoney(amount, fee);
      if (run.safe < debit) throw cashOutError('insufficient_balance', { detail: `Available balance ${run.safe} is below amount plus fee ${debit} (base units)` });
      run.safe -= debit;
      for (const w of windows) run.used.set(w.kind, (run.used.get(w.kind) ?? 0) + amount);
      const record: repo.NewCashOut = {
        id: randomUUID(),
        account_id: state.account_id,
        merchant_id: state.merchant_id,
        transaction_id: newTransactionId(TX_PREFIX.cashOut, now),
        end_to_end_id: newEndToEndId('E', ctx.config.institutionIspb, now),
        external_id: cmd.externalId,
        amount,
        fee_amount: fee,
        description: cmd.description ?? '',
        counterparty_name: destination.name,
        recipient_key: cmd.key,
        recipient_key_type: cmd.keyType,
        recipient_document: destination.document,
        recipient_ispb: destination.ispb,
        request_fingerprint: cmd.fingerprint,
        payer_name: state.holder_name,
        payer_document: state.holder_document,
        metadata: { recipient_bank_name: destination.bankName, txid: cmd.txid, emv: cmd.emv },
        created_at: now,
        claim: item.key.claim ?? null,
      };
      if (cmd.externalId !== null) run.firstAccepted.set(cmd.externalId, accepted.length);
      outcome.push({ accepted: accepted.length });
      accepted.push({ record, item });
    } catch (error) {
      outcome.push({ ok: false, error });
    }
  }
  return {
    accepted,
    refused: (i) => 'ok' in outcome[i]! && !(outcome[i] as BatchOutcome<Reserved>).ok,
    created: (i) => {
      const o = outcome[i]!;
      return 'accepted' in o && o.accepted >= 0;
    },
    rowsOf(written) {
      const byId = new Map(written.map((r) => [r.id, r]));
      return accepted.map((a) => byId.get(a.record.id));
    },
    answer(i, rows) {
      const o = outcome[i]!;
      if (!('accepted' in o)) return o;
      const row = rows[o.accepted >= 0 ? o.accepted : -1 - o.accepted];
      if (!row) throw new Error('cash-out batch: an accepted record was not written');
      return { ok: true, value: o.accepted >= 0 ? { row } : { sameAs: row } };
    },
  };
}

/**
 * The transaction of a batch under the locks: one statement locks the books of the batch's
 * accounts (in id order) and reads what the checks need (again, if it waited for a lock and read
 * a stale snapshot), the checks run here (`decide`), one statement writes the accepted ones. A
 * refused item leaves nothing behind and no savepoint is needed.
 */
async function reserveBatch(
  tx: Sql,
  ctx: AppContext,
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

/** The receiver of a key, or the cash-out error that forbids paying it. */
async function resolveDestination(ctx: AppContext, caller: CashOutCaller, key: string) {
  const entry = await ctx.rail.directory.lookupKey(key);
  if (!entry) throw cashOutError('destination_not_found', { detail: `PIX key ${key} is not registered in the directory` });
  if (entry.accountId === null && entry.ispb !== ctx.config.institutionIspb) return entry;
  // The key belongs to this institution: to one of the caller's accounts (or, for a key registered
  // in the sandbox with this ISPB, to the caller's document), or to someone else here.
  const own =
    entry.accountId !== null
      ? (await merchants.findAccount(ctx.db, entry.accountId))?.merchant_id === caller.merchantId
      : (await merchants.findMerchant(ctx.db, caller.merchantId))?.document === entry.document;
  if (own) throw cashOutError('self_transfer', { detail: 'The key belongs to your own account; move money between your accounts with a TEF: POST /api/external/tef/transfers' });
  throw cashOutError('same_institution_transfer', { detail: 'The key belongs to an account of this institution; use a TEF: POST /api/external/tef/transfers with this pix_key' });
}

/**
 * Checks the limits (per operation, nighttime, daily) against the account's usage (read under the
 * account lock the caller holds) and then the safe balance against amount + fee, throwing the
 * cash-out error; then counts `amount` in the limit windows. Returns the windows counted in.
 */
async function reserveWithinLimits(tx: Sql, account: merchants.AccountRow, safe: number, amount: number, fee: number, now: Date): Promise<UsageWindow[]> {
  const windows = limitWindows(now);
  const used = await repo.usageIn(tx, account.id, windows);
  const problem = limitProblem(
    amount,
    {
      maxAmountCents: account.cash_out_max_amount_cents,
      dailyLimitCents: account.cash_out_daily_limit_cents,
      nighttimeLimitCents: account.cash_out_nighttime_limit_cents,
    },
    windows,
    used,
  );
  if (problem) throw cashOutError(problem.code, { detail: problem.detail });
  const debit = addMoney(amount, fee);
  if (safe < debit) {
    throw cashOutError('insufficient_balance', { detail: `Available balance ${safe} is below amount plus fee ${debit} (base units)` });
  }
  await repo.addUsage(tx, account.id, windows, amount);
  return windows;
}

/** available -> pending for the whole debit (amount + fee). */
function reserve(tx: Sql, accountId: number, transactionId: string, total: number) {
  return movePending(tx, 'reserve', { kind: 'cash_out_reserve', reference: transactionId, accountId, amount: total });
}

/** pending -> available: the reservation given back (rejection, failure), and the limit windows. */
export async function releaseReservation(tx: Sql, row: OwnedTransaction, kind: string, now: Date): Promise<void> {
  await movePending(tx, 'release', { kind, reference: row.transaction_id, accountId: row.account_id, amount: addMoney(row.amount, row.fee_amount), now });
  await repo.addUsage(tx, row.account_id, repo.windowsOf(row), -row.amount);
}

/** The same external_id again: 409 for another command, else the original order resumed or answered. */
async function repeat(ctx: AppContext, existing: OwnedTransaction, cmd: CashOutCommand, key: CashOutKey): Promise<CashOutAnswer> {
  if (existing.kind !== 'cash_out' || existing.request_fingerprint !== cmd.fingerprint) {
    throw cashOutError('external_id_conflict', { detail: `external_id ${cmd.externalId} belongs to ${existing.transaction_id}, sent with a different payload` });
  }
  return resume(ctx, existing, key);
}

/**
 * The same order again (its external_id or its Idempotency-Key): a stage-1 record is sent (again),
 * a failed-but-resumable one (provider_timeout) reserved and sent again, any other answered as it
 * stands.
 */
async function resume(ctx: AppContext, existing: OwnedTransaction, key: CashOutKey): Promise<CashOutAnswer> {
  if (existing.stage === 1) return submit(ctx, existing, key);
  if (existing.resumable) {
    const resumed = await ctx.db.transaction(async (tx) => {
      const balances = await lockAccount(tx, existing.account_id);
      const row = await repo.lockTransaction(tx, existing.id);
      if (!row.resumable) return row;
      const account = (await merchants.findAccount(tx, row.account_id))!;
      const now = ctx.clock.now();
      const windows = await reserveWithinLimits(tx, account, balances.safe, row.amount, row.fee_amount, now);
      await reserve(tx, row.account_id, row.transaction_id, addMoney(row.amount, row.fee_amount));
      return repo.updateState(
        tx,
        row.id,
        { status: TX_STATUS.pending, payment_status: 'processing', stage: 1, resumable: false, reason_code: null, limit_windows: windows },
        now,
      );
    });
    if (resumed.stage === 1) return submit(ctx, resumed, key);
    return cashOutAnswer(resumed);
  }
  return cashOutAnswer(existing);
}

export function paymentOrder(row: OwnedTransaction, institutionIspb: string): PaymentOrder {
  const meta = row.metadata as { txid?: string | null };
  return {
    endToEndId: row.end_to_end_id!,
    transactionId: row.transaction_id,
    amount: row.amount,
    payer: { name: row.payer_name!, document: row.payer_document!, ispb: institutionIspb, accountId: row.account_id },
    receiverKey: row.recipient_key!,
    description: row.description || null,
    txid: meta.txid ?? null,
  };
}

/** Steps 2 and 3 for a stage-1 record. */
async function submit(ctx: AppContext, row: OwnedTransaction, key: CashOutKey): Promise<CashOutAnswer> {
  let ack: PaymentAck | null = null;
  try {
    ack = await ctx.rail.sendPayment(paymentOrder(row, ctx.config.institutionIspb));
  } catch (err) {
    // The order may or may not have reached the rail: it stays accepted at stage 1 and the
    // recovery worker sends it again (the rail deduplicates on the end-to-end id).
    ctx.log.error({ err, transaction_id: row.transaction_id }, 'rail did not answer a payment order; it will be sent again');
  }
  if (ack !== null && ack.status !== 'timeout' && key.prepare) {
    const sent = await recordSent(ctx, row, ack.status === 'queued' ? 'queued' : 'processing', key);
    if (sent) return sent;
  }
  const result = await ctx.db.transaction(async (tx) => {
    const current = await applyPaymentAck(tx, ctx, row, ack);
    if (current === 'timeout') return 'timeout' as const;
    const answer = cashOutAnswer(current);
    await key.record(tx, answer.statusCode, answer.body);
    return answer;
  });
  if (result === 'timeout') throw cashOutError('provider_timeout', { detail: `The central bank did not take ${row.transaction_id}; nothing was debited. Send the same request again after 5 seconds` });
  return result;
}

/**
 * Step 3 when the rail took the order, in one statement on its own (atomic, no BEGIN/COMMIT round
 * trips), which the step 3s of this process that come together share (`sentMarker`): stage 1 -> 2, the event (pix.payout.processing, or pix.payout.queued) and the
 * Idempotency-Key's answer — the record moves only while the request still owns its key. The
 * answer is the record as this move leaves it; undefined when nothing moved (a rail notification
 * or a concurrent repeat moved the record first, or the key was lost): the caller then takes the
 * transactional path, which answers the record as it stands (or fails on the lost key).
 */
async function recordSent(ctx: AppContext, row: OwnedTransaction, paymentStatus: 'processing' | 'queued', key: CashOutKey): Promise<CashOutAnswer | undefined> {
  const now = ctx.clock.now();
  const after: OwnedTransaction = { ...row, stage: 2, payment_status: paymentStatus };
  const answer = cashOutAnswer(after);
  const prepared = key.prepare!(answer.statusCode, answer.body);
  const event = paymentStatus === 'queued' ? 'pix.payout.queued' : 'pix.payout.processing';
  const payload = paymentStatus === 'queued' ? { ...payoutBody(after), queued_at: now.toISOString() } : payoutBody(after);
  let moved: { recorded: boolean } | undefined;
  try {
    moved = await sentMarker(ctx).submit({ row, paymentStatus, now, event: { event, body: outboxBody(event, payload) }, answer: prepared });
  } catch (err) {
    // The rail has the order: a full queue here is no reason to answer 503; the transactional
    // path records it.
    if (err instanceof OverloadedError) return undefined;
    throw err;
  }
  if (!moved) return undefined;
  if (prepared) {
    // Taken over between the statement's check and its update (the record moved: the new holder
    // resumes it and answers it).
    if (!moved.recorded) throw new IdempotencyLostError('the idempotency claim was lost');
    prepared.recorded();
  }
  return answer;
}

/** Step 3 of the cash-outs of this process: the marks that come together go in one statement. */
const sentMarker = batcherPer((ctx: AppContext) =>
  new Batcher<repo.SentMark, { recorded: boolean } | undefined>({
    maxBatch: CASH_OUT_BATCH_MAX,
    maxInFlight: 2,
    maxQueued: CASH_OUT_QUEUE_MAX,
    name: 'the cash-out acknowledgement queue',
    run: async (marks) => (await repo.markSentWithEvents(ctx.db, marks)).map((value) => ({ ok: true, value })),
    observe: ctx.metrics.batchObserver('cash_out_sent'),
  }),
);

/**
 * Applies the rail's acknowledgement of a stage-1 record: returns the record after it, or
 * 'timeout' when the order was released (failed, resumable by repeating the request).
 * `emitTimeoutFailure`: when no caller is waiting for the answer (recovery), a timeout is final and
 * announced with pix.payout.failed.
 */
export async function applyPaymentAck(
  tx: Sql,
  ctx: AppContext,
  row: OwnedTransaction,
  ack: PaymentAck | null,
  options: { emitTimeoutFailure?: boolean } = {},
): Promise<OwnedTransaction | 'timeout'> {
  const now = ctx.clock.now();
  if (ack === null) return repo.lockTransaction(tx, row.id);
  if (ack.status === 'timeout') {
    await lockAccount(tx, row.account_id);
    const current = await repo.lockTransaction(tx, row.id);
    if (current.stage !== 1) return current;
    await releaseReservation(tx, current, 'cash_out_release', now);
    const failed = await repo.updateState(
      tx,
      current.id,
      {
        status: TX_STATUS.failed,
        payment_status: 'failed',
        stage: 3,
        reason_code: 'provider_timeout',
        resumable: !options.emitTimeoutFailure,
      },
      now,
    );
    if (!options.emitTimeoutFailure) return 'timeout';
    await emitFor(tx, 'pix.payout.failed', failed, {
      ...payoutBody(failed),
      reason_code: 'PROVIDER_TIMEOUT',
      reason: 'The central bank did not take the order',
      rejected_at: now.toISOString(),
    });
    return failed;
  }
  const moved = await repo.markSent(tx, row.id, ack.status === 'queued' ? 'queued' : 'processing', now);
  if (!moved) return repo.lockTransaction(tx, row.id); // a rail notification (or a concurrent repeat) got there first
  if (ack.status === 'queued') {
    await emitFor(tx, 'pix.payout.queued', moved, { ...payoutBody(moved), queued_at: now.toISOString() });
  } else {
    await emitFor(tx, 'pix.payout.processing', moved, payoutBody(moved));
  }
  return moved;
}
