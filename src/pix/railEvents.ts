import type { AppContext } from '../context.js';
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
 * transaction together with its id in `rail_inbox`, so a redelivery (the rail delivers at least
 * once) finds the id and does nothing; the per-record state checks of the handlers are a second
 * guard. A notification that leaves an order for the rail (an accepted infraction's return) sends
 * it after that transaction committed — never inside it; if sending fails, the recovery worker
 * sends it again.
 */
export function railNotificationHandler(ctx: AppContext): NotificationHandler {
  return async (n: RailNotification) => {
    const medRefund = await ctx.db.transaction(async (tx): Promise<OwnedTransaction | null> => {
      if (!(await recordNotification(tx, n.id, n.kind))) return null;
      switch (n.kind) {
        case 'payment.accepted':
          await payouts.onPaymentAccepted(tx, ctx, n);
          break;
        case 'payment.held':
          await payouts.onPaymentHeld(tx, ctx, n);
          break;
        case 'payment.settled':
          await payouts.onPaymentSettled(tx, ctx, n);
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
}
