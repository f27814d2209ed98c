import * as repo from '../repository.js';
import { randomUUID } from 'node:crypto';
import { DomainError } from '../../errors/catalog.js';
import type { TxDeps } from '../deps.js';
import type { BatchOutcome } from '../../lib/batcher.js';
import { toBalances } from '../../ledger/ledger.js';
import { newEndToEndId, newTransactionId, TX_PREFIX } from '../../lib/ids.js';
import { addMoney, centsToBaseUnits } from '../../lib/money.js';
import { limitProblem } from '../limits.js';
import type { OwnedTransaction } from '../repository.js';
import type { Reserved, ReserveRequest } from './types.js';

/** Step 1's checks of a batch (limits, balance, repeats), against the figures its strategy read. */

/** The accounts of a batch (in id order) and the external_ids it names, each with its account. */
export function batchScope(items: readonly ReserveRequest[]): [number[], repo.ExternalIdRef[]] {
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
export interface AccountRun {
  state: repo.CashOutLockState;
  safe: number;
  used: Map<string, number>;
  /** external_id -> position in `accepted` of this batch's first record with it. */
  firstAccepted: Map<string, number>;
}

export interface Decided {
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

/** One item's outcome while its batch is decided: settled, or the position of its accepted record (negative: a repeat of an earlier item's). */
type Pending = BatchOutcome<Reserved> | { accepted: number };

/**
 * The checks of a batch, in item order, against each account's running balance and running limit
 * usage as `accounts` gives them: a repeat of an external_id already taken (before, or by an
 * earlier item of this batch) is a repeat; a limit or balance refusal is the item's own cash-out
 * error; the others are accepted, with their records. All checks of an item precede its writes.
 */
export function decide(ctx: Pick<TxDeps, 'config'>, items: readonly ReserveRequest[], accounts: Map<number, repo.CashOutLockState>, now: Date, windows: repo.UsageWindow[]): Decided {
  const runs = new Map<number, AccountRun>();
  for (const [id, state] of accounts) {
    runs.set(id, { state, safe: toBalances(state.books).safe, used: new Map(Object.entries(state.usage ?? {})), firstAccepted: new Map() });
  }
  const accepted: { record: repo.NewCashOut; item: ReserveRequest }[] = [];
  const outcome: Pending[] = [];
  for (const item of items) {
    const { cmd } = item;
    const run = runs.get(item.caller.accountId)!;
    const repeated = repeatOf(run, cmd.externalId);
    if (repeated) {
      outcome.push(repeated);
      continue;
    }
    try {
      const record = check(ctx, item, run, now, windows);
      if (cmd.externalId !== null) run.firstAccepted.set(cmd.externalId, accepted.length);
      outcome.push({ accepted: accepted.length });
      accepted.push({ record, item });
    } catch (error) {
      outcome.push({ ok: false, error });
    }
  }
  return decided(accepted, outcome);
}

/** A repeat of an external_id the account already has, or that an earlier item of this batch took; undefined otherwise. */
function repeatOf(run: AccountRun, externalId: string | null): Pending | undefined {
  if (externalId === null) return undefined;
  const id = run.state.existing?.[externalId];
  if (id !== undefined) return { ok: true, value: { existingId: id } };
  const first = run.firstAccepted.get(externalId);
  return first === undefined ? undefined : { accepted: -1 - first };
}

/** One item's limits and balance against its account's running figures (counted in when it passes): its record, or the cash-out error. */
function check(ctx: Pick<TxDeps, 'config'>, item: ReserveRequest, run: AccountRun, now: Date, windows: repo.UsageWindow[]): repo.NewCashOut {
  const { state } = run;
  const limits = {
    maxAmountCents: state.cash_out_max_amount_cents,
    dailyLimitCents: state.cash_out_daily_limit_cents,
    nighttimeLimitCents: state.cash_out_nighttime_limit_cents,
  };
  const fee = centsToBaseUnits(state.cash_out_fee_cents);
  const amount = centsToBaseUnits(item.cmd.amountCents);
  const problem = limitProblem(amount, limits, windows, run.used);
  if (problem) throw new DomainError(problem.code, { detail: problem.detail });
  const debit = addMoney(amount, fee);
  if (run.safe < debit) throw new DomainError('insufficient_balance', { detail: `Available balance ${run.safe} is below amount plus fee ${debit} (base units)` });
  run.safe -= debit;
  for (const w of windows) run.used.set(w.kind, (run.used.get(w.kind) ?? 0) + amount);
  return newRecord(ctx, item, state, amount, fee, now, windows);
}

/** The stage-1 record of an accepted cash-out. */
function newRecord(
  ctx: Pick<TxDeps, 'config'>,
  item: ReserveRequest,
  state: repo.CashOutLockState,
  amount: number,
  fee: number,
  now: Date,
  windows: repo.UsageWindow[],
): repo.NewCashOut {
  const { cmd, destination } = item;
  return {
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
    recipient_bank_name: destination.bankName,
    metadata: { txid: cmd.txid, emv: cmd.emv },
    created_at: now,
    claim: item.key.claim ?? null,
  };
}

/** The batch's decisions, answered once its accepted records are written. */
function decided(accepted: Decided['accepted'], outcome: readonly Pending[]): Decided {
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
