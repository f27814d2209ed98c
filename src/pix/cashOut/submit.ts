import * as repo from '../repository.js';
import { DomainError } from '../../errors/catalog.js';
import type { CashOutDeps, TxDeps } from '../deps.js';
import type { Sql } from '../../db/db.js';
import { outboxBody } from '../../events/outbox.js';
import { IdempotencyLostError } from '../../lib/idempotencyKey.js';
import { Batcher, batcherPer, OverloadedError } from '../../lib/batcher.js';
import { lockAccount } from '../../ledger/ledger.js';
import type { PaymentAck, PaymentOrder } from '../../rail/rail.js';
import { TX_STATUS } from '../../transactions/repository.js';
import { emitFor, payoutBody } from '../events.js';
import type { OwnedTransaction } from '../repository.js';
import { CASH_OUT_BATCH_MAX, CASH_OUT_QUEUE_MAX, cashOutAnswer, type CashOutAnswer, type CashOutKey } from './types.js';
import { releaseReservation } from './reservation.js';

/** Steps 2 and 3: the rail's order and the record of its acknowledgement. */

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
export async function submit(ctx: CashOutDeps, row: OwnedTransaction, key: CashOutKey): Promise<CashOutAnswer> {
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
  if (result === 'timeout') throw new DomainError('provider_timeout', { detail: `The central bank did not take ${row.transaction_id}; nothing was debited. Send the same request again after 5 seconds` });
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
async function recordSent(ctx: CashOutDeps, row: OwnedTransaction, paymentStatus: 'processing' | 'queued', key: CashOutKey): Promise<CashOutAnswer | undefined> {
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
const sentMarker = batcherPer((ctx: CashOutDeps) =>
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
  ctx: Pick<TxDeps, 'clock'>,
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
