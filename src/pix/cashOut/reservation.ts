import * as merchants from '../../merchants/repository.js';
import * as repo from '../repository.js';
import { DomainError } from '../../errors/catalog.js';
import type { Sql } from '../../db/db.js';
import { addMoney } from '../../lib/money.js';
import { limitProblem, limitWindows } from '../limits.js';
import { movePending } from '../postings.js';
import type { OwnedTransaction, UsageWindow } from '../repository.js';

/** A single cash-out's reservation under the account lock (a resumed one) and its release. */

/**
 * Checks the limits (per operation, nighttime, daily) against the account's usage (read under the
 * account lock the caller holds) and then the safe balance against amount + fee, throwing the
 * cash-out error; then counts `amount` in the limit windows. Returns the windows counted in.
 */
export async function reserveWithinLimits(tx: Sql, account: merchants.AccountRow, safe: number, amount: number, fee: number, now: Date): Promise<UsageWindow[]> {
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
  if (problem) throw new DomainError(problem.code, { detail: problem.detail });
  const debit = addMoney(amount, fee);
  if (safe < debit) {
    throw new DomainError('insufficient_balance', { detail: `Available balance ${safe} is below amount plus fee ${debit} (base units)` });
  }
  await repo.addUsage(tx, account.id, windows, amount);
  return windows;
}

/** available -> pending for the whole debit (amount + fee). */
export function reserve(tx: Sql, accountId: number, transactionId: string, total: number) {
  return movePending(tx, 'reserve', { kind: 'cash_out_reserve', reference: transactionId, accountId, amount: total });
}

/** pending -> available: the reservation given back (rejection, failure), and the limit windows. */
export async function releaseReservation(tx: Sql, row: OwnedTransaction, kind: string, now: Date): Promise<void> {
  await movePending(tx, 'release', { kind, reference: row.transaction_id, accountId: row.account_id, amount: addMoney(row.amount, row.fee_amount), now });
  await repo.addUsage(tx, row.account_id, repo.windowsOf(row), -row.amount);
}
