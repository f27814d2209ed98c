import type { PixDeps, TxDeps } from '../pix/deps.js';
import type { Sql } from '../db/db.js';
import { isoZ } from '../lib/clock.js';
import { refundBody, refundTotalsBody } from '../pix/events.js';
import { applyReturnAck, bookReturnSettled, lockReturn, returnOrder } from '../pix/refund.js';
import * as records from '../transactions/records.js';
import type { OwnedTransaction } from '../transactions/records.js';
import type { RailNotification, ReturnAck } from '../rail/rail.js';
import { TX_STATUS } from '../transactions/repository.js';
import { moveBlock } from './blocks.js';
import { emitMedEvent, refundRequestBody } from './events.js';
import { MED } from './infractions.js';
import * as repo from './repository.js';

/**
 * The return of an accepted infraction (a `med_refund` record, `MEDRET…`, end-to-end id `D…`). It
 * travels like a voluntary refund — sent to the rail outside any transaction, acknowledged, settled
 * or rejected by notification — but its money waits in the `blocked` book, not `pending`:
 *
 *   settled   blocked -> central bank; the infraction's refund `settled`; pix.refund.completed
 *   rejected  blocked -> available (then short blocks are topped up); refund `failed`; pix.refund.failed
 *
 * Both events carry the totals of refund rule 6 (voluntary refunds of the same original count) and
 * have the infraction as subject.
 */

/** Sends a MED return at stage 1 and records the rail's answer. A failure is left to the recovery worker. */
export async function sendMedRefund(ctx: PixDeps, row: OwnedTransaction): Promise<void> {
  const original = (await records.findById(ctx.db, row.original_id!))!;
  let ack: ReturnAck;
  try {
    ack = await ctx.rail.sendReturn(returnOrder(row, original));
  } catch (err) {
    ctx.log.error({ err, transaction_id: row.transaction_id }, 'rail did not answer a MED return; the recovery worker sends it again');
    return;
  }
  await ctx.db.transaction((tx) => applyReturnAck(tx, ctx, row, ack, settleMedRefund));
}

async function infractionOf(tx: Sql, row: OwnedTransaction) {
  return repo.lockInfraction(tx, row.infraction_id!);
}

/** blocked -> central bank, settled, pix.refund.completed (status settled). The account is locked. */
export async function settleMedRefund(tx: Sql, ctx: TxDeps, row: OwnedTransaction, settledAt: Date): Promise<OwnedTransaction> {
  const now = ctx.clock.now();
  const settled = await bookReturnSettled(tx, ctx, row, settledAt, { kind: 'med_refund_settle', from: 'blocked' });
  const infraction = await infractionOf(tx, row);
  await repo.updateInfraction(tx, infraction.id, { blockedDelta: -row.amount, refundedDelta: row.amount, refundStatus: 'settled' }, now);
  await emitRefundOutcome(tx, settled, 'pix.refund.completed', { completed_at: isoZ(settledAt) });
  return settled;
}

type Of<K extends RailNotification['kind']> = Extract<RailNotification, { kind: K }>;

/** return.settled of a MED return; false when the return is not one (a voluntary refund's). */
export async function onMedReturnSettled(tx: Sql, ctx: TxDeps, n: Of<'return.settled'>): Promise<boolean> {
  const row = await lockReturn(tx, n.endToEndId, MED.refundKind);
  if (!row) return false;
  if (row.stage !== 3) await settleMedRefund(tx, ctx, row, n.settledAt);
  return true;
}

/** return.rejected of a MED return; false when the return is not one. */
export async function onMedReturnRejected(tx: Sql, ctx: TxDeps, n: Of<'return.rejected'>): Promise<boolean> {
  const row = await lockReturn(tx, n.endToEndId, MED.refundKind);
  if (!row) return false;
  if (row.stage === 3) return true;
  const now = ctx.clock.now();
  await moveBlock(tx, 'release', { kind: 'med_refund_reverse', reference: row.transaction_id, accountId: row.account_id, amount: row.amount, now });
  const failed = await records.updateState(
    tx,
    row.id,
    { status: TX_STATUS.failed, payment_status: 'failed', stage: 3, reason_code: n.reasonCode, reason: n.reason, failed_at: now },
    now,
  );
  const infraction = await infractionOf(tx, row);
  await repo.updateInfraction(tx, infraction.id, { blockedDelta: -row.amount, releasedDelta: row.amount, refundStatus: 'failed' }, now);
  await emitRefundOutcome(tx, failed, 'pix.refund.failed', { reason_code: n.reasonCode, failure_reason: n.reason, failed_at: now.toISOString() });
  return true;
}

/** pix.refund.completed / .failed of a MED return: the refund's fields, the infraction's, the totals. */
async function emitRefundOutcome(tx: Sql, refund: OwnedTransaction, event: string, extra: Record<string, unknown>): Promise<void> {
  const infraction = (await repo.findInfraction(tx, refund.infraction_id!))!;
  const original = (await records.findById(tx, refund.original_id!))!;
  const totals = await records.refundTotals(tx, original.id);
  await emitMedEvent(tx, infraction, event, {
    ...refundRequestBody(infraction),
    ...refundBody(refund, original),
    ...refundTotalsBody(original.amount, totals.executed, refund.amount),
    ...extra,
  });
}
