import * as repo from '../repository.js';
import type { CashOutDeps } from '../deps.js';
import { LOCK_NOT_AVAILABLE, provesRollback, sqlState } from '../../db/db.js';
import { onePer, type BatchOutcome } from '../../lib/batcher.js';
import { toBalances } from '../../ledger/ledger.js';
import { addMoney, centsToBaseUnits } from '../../lib/money.js';
import { limitWindows } from '../limits.js';
import type { OwnedTransaction } from '../repository.js';
import type { LockMode, Reserved, ReserveRequest } from './types.js';
import { batchScope, decide, type Decided } from './decide.js';

/** Step 1's strategies without a transaction: decided without a read (`reserveAssumed`) or on one read (`reserveUnlocked`). */

/**
 * The configuration (fee, limits, holder) of the accounts whose cash-outs this process has read,
 * by account id: a batch of known accounts is decided on it without a read (`reserveAssumed`). Never
 * trusted on its own — the writing statement compares it with the account's row — so nothing has
 * to tell this process that an account changed: a stale entry costs the read it saves, and the
 * read refreshes it.
 */
const knownAccounts = onePer((_ctx: CashOutDeps) => new Map<number, repo.CashOutAccountConfig>());
const KNOWN_ACCOUNTS_MAX = 10_000;
/** The available balance a batch decided without a read assumes: the statement checks the real one. */
const UNLIMITED = Number.MAX_SAFE_INTEGER;

export function remember(ctx: CashOutDeps, accounts: ReadonlyMap<number, repo.CashOutLockState>): void {
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
export async function reserveAssumed(
  ctx: CashOutDeps,
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

export async function reserveUnlocked(
  ctx: CashOutDeps,
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
