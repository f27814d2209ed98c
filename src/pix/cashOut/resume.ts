import * as merchants from '../../merchants/repository.js';
import * as repo from '../repository.js';
import { DomainError } from '../../errors/catalog.js';
import type { CashOutDeps } from '../deps.js';
import { lockAccount } from '../../ledger/ledger.js';
import { addMoney } from '../../lib/money.js';
import { TX_STATUS } from '../../transactions/repository.js';
import type { CashOutCommand } from '../cashOutCommand.js';
import type { OwnedTransaction } from '../repository.js';
import { cashOutAnswer, type CashOutAnswer, type CashOutKey } from './types.js';
import { reserve, reserveWithinLimits } from './reservation.js';
import { submit } from './submit.js';

/** The same order again: a repeat of its external_id or a retry under its Idempotency-Key. */

/** The same external_id again: 409 for another command, else the original order resumed or answered. */
export async function repeat(ctx: CashOutDeps, existing: OwnedTransaction, cmd: CashOutCommand, key: CashOutKey): Promise<CashOutAnswer> {
  if (existing.kind !== 'cash_out' || existing.request_fingerprint !== cmd.fingerprint) {
    throw new DomainError('external_id_conflict', { detail: `external_id ${cmd.externalId} belongs to ${existing.transaction_id}, sent with a different payload` });
  }
  return resume(ctx, existing, key);
}

/**
 * The same order again (its external_id or its Idempotency-Key): a stage-1 record is sent (again),
 * a failed-but-resumable one (provider_timeout) reserved and sent again, any other answered as it
 * stands.
 */
export async function resume(ctx: CashOutDeps, existing: OwnedTransaction, key: CashOutKey): Promise<CashOutAnswer> {
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
