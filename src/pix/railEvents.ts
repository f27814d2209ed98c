import type { AppContext } from '../context.js';
import type { NotificationHandler, RailNotification } from '../rail/rail.js';
import { receiveInboundPayment } from './inbound.js';
import * as payouts from './payouts.js';
import { onReturnRejected, onReturnSettled } from './refund.js';
import { recordNotification } from './repository.js';

/**
 * The service's handler of rail notifications. Each notification is applied in one database
 * transaction together with its id in `rail_inbox`, so a redelivery (the rail delivers at least
 * once) finds the id and does nothing; the per-record state checks of the handlers are a second
 * guard.
 */
export function railNotificationHandler(ctx: AppContext): NotificationHandler {
  return (n: RailNotification) =>
    ctx.db.transaction(async (tx) => {
      if (!(await recordNotification(tx, n.id, n.kind))) return;
      switch (n.kind) {
        case 'payment.accepted':
          return payouts.onPaymentAccepted(tx, ctx, n);
        case 'payment.held':
          return payouts.onPaymentHeld(tx, ctx, n);
        case 'payment.settled':
          return payouts.onPaymentSettled(tx, ctx, n);
        case 'payment.rejected':
          return payouts.onPaymentRejected(tx, ctx, n);
        case 'payment.returned':
          return payouts.onPaymentReturned(tx, ctx, n);
        case 'payment.return_rejected':
          return payouts.onPaymentReturnRejected(tx, ctx, n);
        case 'return.settled':
          return onReturnSettled(tx, ctx, n);
        case 'return.rejected':
          return onReturnRejected(tx, ctx, n);
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
          return;
      }
    });
}
