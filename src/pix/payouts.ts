import type { TxDeps } from './deps.js';
import type { Sql } from '../db/db.js';
import { outboxBody } from '../events/outbox.js';
import { INSTITUTION_BOOK, post } from '../ledger/ledger.js';
import { bankName } from '../lib/banks.js';
import { addMoney } from '../lib/money.js';
import { newTransactionId, TX_PREFIX } from '../lib/ids.js';
import type { RailNotification } from '../rail/rail.js';
import { insertTransaction, TX_STATUS } from '../transactions/records.js';
import { releaseReservation } from './cashOut.js';
import { emitFor, payoutBody } from './events.js';
import { REFUSAL, RefusedNotification } from './railRefusals.js';
import * as repo from './repository.js';
import type { OwnedTransaction } from './repository.js';

/**
 * What happens to a cash-out after the rail took it: the rail's notifications applied to the
 * record, each in the handler's transaction (state, ledger entries, outbox event together).
 * Every function is idempotent: a record already past the state a notification reports is left
 * alone.
 *
 *   payment.accepted  queued -> processing            pix.payout.processing
 *   payment.held      (stays processing)              pix.payout.held
 *   payment.settled   -> settled: pending -> central bank + fees          pix.payout.confirmed
 *   payment.rejected  -> rejected: pending -> available                   pix.payout.failed
 *   payment.returned  credit from the central bank, a `payout_return` record  pix.payout.returned
 *                     (of a settled payout, within its amount; else refused back to the rail)
 *   payment.return_rejected  nothing moves                                pix.payout.return.failed
 */

type Of<K extends RailNotification['kind']> = Extract<RailNotification, { kind: K }>;

/** The cash-out with this end-to-end id, locked (its account first, when money moves). */
async function lockPayout(tx: Sql, ctx: TxDeps, endToEndId: string, withAccount: boolean): Promise<OwnedTransaction | null> {
  // With the account: found and the books locked in one statement.
  const found = withAccount ? await repo.findByEndToEndIdLockingCashOutAccount(tx, endToEndId) : await repo.findByEndToEndId(tx, endToEndId);
  if (!found || found.kind !== 'cash_out') {
    ctx.log.warn({ end_to_end_id: endToEndId }, 'rail notification for an unknown payout ignored');
    return null;
  }
  return repo.lockTransaction(tx, found.id);
}

/** A notification that overtook the acknowledgement of the order: the order was accepted first. */
async function announceAcceptance(tx: Sql, row: OwnedTransaction): Promise<void> {
  if (row.stage === 1) await emitFor(tx, 'pix.payout.processing', row, payoutBody(row));
}

export async function onPaymentAccepted(tx: Sql, ctx: TxDeps, n: Of<'payment.accepted'>): Promise<void> {
  const row = await lockPayout(tx, ctx, n.endToEndId, false);
  if (!row || row.stage === 3 || (row.stage === 2 && row.payment_status !== 'queued')) return;
  // Only a protection-queued order is released: if its acknowledgement was never recorded (stage 1),
  // it was queued first.
  if (row.stage === 1) await emitFor(tx, 'pix.payout.queued', row, { ...payoutBody(row), queued_at: n.at.toISOString() });
  const moved = await repo.updateState(tx, row.id, { payment_status: 'processing', stage: 2 }, ctx.clock.now());
  await emitFor(tx, 'pix.payout.processing', moved, payoutBody(moved));
}

export async function onPaymentHeld(tx: Sql, ctx: TxDeps, n: Of<'payment.held'>): Promise<void> {
  const row = await lockPayout(tx, ctx, n.endToEndId, false);
  if (!row || row.stage === 3 || row.held_at) return;
  await announceAcceptance(tx, row);
  const now = ctx.clock.now();
  const held = await repo.updateState(tx, row.id, { stage: 2, payment_status: 'processing', held_at: now }, now);
  await emitFor(tx, 'pix.payout.held', held, { ...payoutBody(held), held_at: now.toISOString() });
}

/**
 * The `payment.settled` notifications of one delivery batch (or one alone: a batch of one), in two
 * statements for all of them and no transaction (issue 12): the records read without locks
 * (`repo.readCashOutsForSettlement`: what their events say), then one statement records the
 * notification ids in rail_inbox and, for those that were new, locks the records, and settles each
 * one not settled yet as of its lock: ledger transaction (pending -> central bank + fees), record
 * (stage 3), events — `pix.payout.processing` first for a record still at stage 1 then
 * (`repo.settleCashOuts`). The books are taken last, by the ledger's running balance in that
 * statement, in ledger-account id order (the lock order of every money movement): a settlement
 * only gives back what its own reservation put in `pending` and reads no balance, so the account
 * lock every cash-out of the account needs is held only while that statement runs and commits —
 * no round trip of this process in between. No deadlock with the books-then-record order of the
 * other paths: those touch a cash-out's record only while it is at stage 1 or failed, never while
 * the rail settles it; a deadlock would fail the statement, and the caller (railEvents.ts) applies
 * the batch again one by one, what still fails being delivered again by the rail. `sql` may be a
 * transaction: the statements then commit with it.
 */
export async function onPaymentsSettled(sql: Sql, ctx: TxDeps, notifications: readonly Of<'payment.settled'>[]): Promise<void> {
  const unique = [...new Map(notifications.map((n) => [n.id, n])).values()];
  const rows = await repo.readCashOutsForSettlement(sql, unique.map((n) => n.endToEndId));
  const byEndToEndId = new Map(rows.map((r) => [r.end_to_end_id, r]));
  const settling = new Set<string>();
  const items: repo.CashOutSettlement[] = [];
  for (const n of unique) {
    const row = byEndToEndId.get(n.endToEndId);
    if (!row || row.stage === 3 || settling.has(row.id)) continue;
    settling.add(row.id);
    addMoney(row.amount, row.fee_amount); // in range (it was reserved)
    items.push({
      notificationId: n.id,
      row,
      settledAt: n.settledAt,
      // As announceAcceptance: for a settlement that overtook the acknowledgement of the order
      // (written only if the record is at stage 1 as of the statement's lock).
      processing: outboxBody('pix.payout.processing', payoutBody(row)),
      confirmed: outboxBody('pix.payout.confirmed', { ...payoutBody(row), settled_at: n.settledAt.toISOString() }),
    });
  }
  const fresh = await repo.settleCashOuts(sql, unique, items, ctx.clock.now());
  for (const n of unique) {
    if (fresh.has(n.id) && !byEndToEndId.has(n.endToEndId)) ctx.log.warn({ end_to_end_id: n.endToEndId }, 'rail notification for an unknown payout ignored');
  }
}

export async function onPaymentRejected(tx: Sql, ctx: TxDeps, n: Of<'payment.rejected'>): Promise<void> {
  const row = await lockPayout(tx, ctx, n.endToEndId, true);
  if (!row || row.stage === 3) return;
  await announceAcceptance(tx, row);
  const now = ctx.clock.now();
  await releaseReservation(tx, row, 'cash_out_reverse', now);
  const rejected = await repo.updateState(
    tx,
    row.id,
    { status: TX_STATUS.rejected, payment_status: 'rejected', stage: 3, reason_code: n.reasonCode, reason: n.reason, failed_at: now },
    now,
  );
  await emitFor(tx, 'pix.payout.failed', rejected, {
    ...payoutBody(rejected),
    reason_code: n.reasonCode,
    reason: n.reason,
    rejected_at: now.toISOString(),
  });
}

/** A return of the payout: money coming back (credit), without fee. */
function returnBody(row: OwnedTransaction, amount: number) {
  return { ...payoutBody(row), direction: 'credit', amount, fee_amount: 0, net_amount: amount, original_amount: row.amount };
}

/**
 * A return of a payout: credited only if the payout settled and the returns stay within what it
 * settled (`transactions.returned_amount`, CHECKed by the database too, migration 0690). Anything
 * else — a return of an unknown or unsettled payout, or beyond its amount — is refused back to the
 * rail (RefusedNotification: recorded, not credited, not retried; src/pix/railRefusals.ts).
 */
export async function onPaymentReturned(tx: Sql, ctx: TxDeps, n: Of<'payment.returned'>): Promise<void> {
  const row = await lockPayout(tx, ctx, n.endToEndId, true);
  if (!row) throw new RefusedNotification(REFUSAL.payoutNotFound);
  if (await repo.findByEndToEndId(tx, n.returnEndToEndId)) return; // this return was credited already
  if (row.payment_status !== 'settled' && row.payment_status !== 'returned') throw new RefusedNotification(REFUSAL.payoutNotSettled, row.account_id);
  const total = addMoney(row.returned_amount, n.amount);
  if (total > row.amount) throw new RefusedNotification(REFUSAL.returnExceeded, row.account_id);
  const now = ctx.clock.now();
  const back = await insertTransaction(tx, {
    transaction_id: newTransactionId(TX_PREFIX.payoutReturn, now),
    account_id: row.account_id,
    kind: 'payout_return',
    type: 'pix',
    direction: 'inbound',
    status: TX_STATUS.completed,
    stage: 3,
    end_to_end_id: n.returnEndToEndId,
    amount: n.amount,
    description: `Devolução de ${row.transaction_id}: ${n.reason}`,
    counterparty_name: row.counterparty_name,
    payer_document: row.recipient_document,
    payer_ispb: row.recipient_ispb,
    payer_bank_name: bankName(row.recipient_ispb),
    original_id: row.id,
    return_code: n.returnCode,
    created_at: n.returnedAt,
    completed_at: n.returnedAt,
  });
  await post(tx, {
    kind: 'payout_return',
    reference: back.transaction_id,
    now,
    postings: [
      { book: INSTITUTION_BOOK.centralBank, amount: -n.amount },
      { book: { accountId: row.account_id, book: 'available' }, amount: n.amount },
    ],
  });
  const updated = await repo.updateState(tx, row.id, { ...(total === row.amount ? { payment_status: 'returned' } : {}), returned_amount: total }, now);
  await emitFor(tx, 'pix.payout.returned', updated, {
    ...returnBody(updated, n.amount),
    return_transaction_id: back.transaction_id,
    return_end_to_end_id: n.returnEndToEndId,
    return_code: n.returnCode,
    reason: n.reason,
    total_refunded: total,
    remaining_refundable: row.amount - total,
    is_partial: n.amount < row.amount,
    returned_at: n.returnedAt.toISOString(),
  });
}

export async function onPaymentReturnRejected(tx: Sql, ctx: TxDeps, n: Of<'payment.return_rejected'>): Promise<void> {
  const row = await lockPayout(tx, ctx, n.endToEndId, false);
  if (!row) return;
  await emitFor(tx, 'pix.payout.return.failed', row, {
    ...returnBody(row, n.amount),
    return_end_to_end_id: n.attemptId,
    reason_code: n.reasonCode,
    reason: n.reason,
    rejected_at: ctx.clock.now().toISOString(),
  });
}
