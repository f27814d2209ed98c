import type { AppContext } from '../context.js';
import type { BatchOutcome } from '../lib/batcher.js';
import { onInfractionReported, onInfractionResolved } from '../med/infractions.js';
import { onMedReturnRejected, onMedReturnSettled, sendMedRefund } from '../med/refunds.js';
import type { NotificationHandler, RailNotification } from '../rail/rail.js';
import { receiveInboundPayment } from './inbound.js';
import * as payouts from './payouts.js';
import { onReturnRejected, onReturnSettled } from './refund.js';
import type { OwnedTransaction } from './repository.js';
import { recordNotification } from './repository.js';

/**
 * The service's handler of rail notifications. Each notification is applied in one database
 * transaction (settlements: in one statement) together with its id in `rail_inbox`, so a
 * redelivery (the rail delivers at least once) finds the id and does nothing; the per-record
 * state checks of the handlers are a second guard. A notification that leaves an order for the rail (an accepted infraction's return) sends
 * it after that transaction committed — never inside it; if sending fails, the recovery worker
 * sends it again.
 */
export function railNotificationHandler(ctx: AppContext): NotificationHandler {
  const one = async (n: RailNotification): Promise<void> => {
    // A settlement is applied as a batch of one: its own statement records it in rail_inbox.
    if (n.kind === 'payment.settled') return payouts.onPaymentsSettled(ctx.db, ctx, [n]);
    const medRefund = await ctx.db.transaction(async (tx): Promise<OwnedTransaction | null> => {
      if (!(await recordNotification(tx, n.id, n.kind))) return null;
      switch (n.kind) {
        case 'payment.accepted':
          await payouts.onPaymentAccepted(tx, ctx, n);
          break;
        case 'payment.held':
          await payouts.onPaymentHeld(tx, ctx, n);
          break;
        case 'payment.rejected':
          await payouts.onPaymentRejected(tx, ctx, n);
          break;
        case 'payment.returned':
          await payouts.onPaymentReturned(tx, ctx, n);
          break;
        case 'payment.return_rejected':
          await payouts.onPaymentReturnRejected(tx, ctx, n);
          break;
        case 'return.settled':
          if (!(await onMedReturnSettled(tx, ctx, n))) await onReturnSettled(tx, ctx, n);
          break;
        case 'return.rejected':
          if (!(await onMedReturnRejected(tx, ctx, n))) await onReturnRejected(tx, ctx, n);
          break;
        case 'inbound.payment':
          await receiveInboundPayment(tx, ctx, {
            endToEndId: n.endToEndId,
            amount: n.amount,
            accountId: n.receiverAccountId,
            payer: n.payer,
            description: n.description,
            txid: n.txid,
            receivedAt: n.receivedAt,
          });
          break;
        case 'infraction.reported':
          await onInfractionReported(tx, ctx, n);
          break;
        case 'infraction.resolved':
          return onInfractionResolved(tx, ctx, n);
        default: {
          const unknown: never = n;
          throw new Error(`unknown rail notification ${JSON.stringify(unknown)}`);
        }
      }
      return null;
    });
    if (medRefund) await sendMedRefund(ctx, medRefund);
  };
  return Object.assign(one, { batch: (notifications: RailNotification[]) => handleBatch(ctx, one, notifications) });
}

type Settled = Extract<RailNotification, { kind: 'payment.settled' }>;

/**
 * A delivery batch of the rail (at most one notification per subject, so their order does not
 * matter between them): the `payment.settled` ones applied together by one statement
 * (`payouts.onPaymentsSettled`: one commit for all the settlements of the batch instead of one
 * each), every other kind one by one as before, concurrently. If the settlements' statement
 * fails, they are applied one by one, so one bad notification never blocks the others: each
 * answers with its own outcome (a failed one is delivered again later by the rail).
 */
async function handleBatch(ctx: AppContext, one: (n: RailNotification) => Promise<void>, notifications: RailNotification[]): Promise<BatchOutcome<void>[]> {
  const outcomes = new Map<RailNotification, BatchOutcome<void>>();
  const each = (list: readonly RailNotification[]) =>
    Promise.all(
      list.map((n) =>
        one(n).then(
          () => void outcomes.set(n, { ok: true, value: undefined }),
          (error: unknown) => void outcomes.set(n, { ok: false, error }),
        ),
      ),
    );
  const settled = notifications.filter((n): n is Settled => n.kind === 'payment.settled');
  const together = async () => {
    if (settled.length === 0) return;
    try {
      await payouts.onPaymentsSettled(ctx.db, ctx, settled);
      for (const n of settled) outcomes.set(n, { ok: true, value: undefined });
    } catch (err) {
      ctx.log.warn({ err, notifications: settled.length }, 'settlement batch failed; applying its notifications one by one');
      await each(settled);
    }
  };
  await Promise.all([together(), each(notifications.filter((n) => n.kind !== 'payment.settled'))]);
  return notifications.map((n) => outcomes.get(n)!);
}
