import type { PixDeps } from './deps.js';
import type { BatchOutcome } from '../lib/batcher.js';
import { onInfractionReported, onInfractionResolved } from '../med/infractions.js';
import { onMedReturnRejected, onMedReturnSettled, sendMedRefund } from '../med/refunds.js';
import type { Sql } from '../db/db.js';
import { AmountTooLargeError } from '../lib/money.js';
import type { NotificationAnswer, NotificationHandler, RailNotification, Refusal } from '../rail/rail.js';
import { receiveInboundPayment } from './inbound.js';
import * as payouts from './payouts.js';
import { onReturnRejected, onReturnSettled } from './refund.js';
import type { OwnedTransaction } from './repository.js';
import { recordNotification } from './repository.js';
import { findRefusal, isCredit, recordRefusal, REFUSAL, RefusedNotification, type CreditNotification } from './railRefusals.js';

/**
 * The service's handler of rail notifications. Each notification is applied in one database
 * transaction (settlements: in one statement) together with its id in `rail_inbox`, so a
 * redelivery (the rail delivers at least once) finds the id and does nothing; the per-record
 * state checks of the handlers are a second guard. A notification that leaves an order for the
 * rail (an accepted infraction's return) sends it after that transaction committed — never inside
 * it; if sending fails, the recovery worker sends it again. Money that cannot be credited (a return
 * the payout does not allow, a credit past the maximum balance) is refused back to the payer and
 * recorded (src/pix/railRefusals.ts): the handler answers `{refused}` instead of failing, so the
 * rail does not deliver it again.
 */
export function railNotificationHandler(ctx: PixDeps): NotificationHandler {
  const one = async (n: RailNotification): Promise<NotificationAnswer> => {
    // A settlement is applied as a batch of one: its own statement records it in rail_inbox.
    if (n.kind === 'payment.settled') return payouts.onPaymentsSettled(ctx.db, ctx, [n]);
    let handled: { medRefund: OwnedTransaction | null; answer: NotificationAnswer };
    try {
      handled = await ctx.db.transaction((tx) => apply(tx, ctx, n));
    } catch (err) {
      // Money that cannot be credited is refused back to the payer, in a transaction of its own
      // (the one above rolled back): recorded, answered to the rail, never retried.
      const credit = isCredit(n) ? n : null;
      const refused = credit ? refusalOf(err, credit) : undefined;
      if (!credit || !refused) throw err;
      const answer = await ctx.db.transaction((tx) => recordRefusal(tx, ctx.log, credit, refused.refusal, refused.accountId));
      return answer ? { refused: answer } : undefined;
    }
    if (handled.medRefund) await sendMedRefund(ctx, handled.medRefund);
    return handled.answer;
  };
  return Object.assign(one, { batch: (notifications: RailNotification[]) => handleBatch(ctx, one, notifications) });
}

/** Why a credit failed, when the failure is a refusal: the handler's own, or a credit past the maximum balance. */
function refusalOf(err: unknown, n: CreditNotification): { refusal: Refusal; accountId: number | null } | undefined {
  if (err instanceof RefusedNotification) return { refusal: err.refusal, accountId: err.accountId };
  if (err instanceof AmountTooLargeError) return { refusal: REFUSAL.balanceLimit, accountId: n.kind === 'inbound.payment' ? n.receiverAccountId : null };
  return undefined;
}

/** One notification (not a settlement) applied in the caller's transaction with its id in rail_inbox. */
async function apply(tx: Sql, ctx: PixDeps, n: Exclude<RailNotification, { kind: 'payment.settled' }>): Promise<{ medRefund: OwnedTransaction | null; answer: NotificationAnswer }> {
  const done = { medRefund: null, answer: undefined };
  if (!(await recordNotification(tx, n.id, n.kind, n.at))) {
    // Handled before: a refused credit is answered as it was the first time.
    const refusal = isCredit(n) ? await findRefusal(tx, n.id) : undefined;
    return refusal ? { medRefund: null, answer: { refused: refusal } } : done;
  }
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
      return { medRefund: await onInfractionResolved(tx, ctx, n), answer: undefined };
    default: {
      const unknown: never = n;
      throw new Error(`unknown rail notification ${JSON.stringify(unknown)}`);
    }
  }
  return done;
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
async function handleBatch(
  ctx: PixDeps,
  one: (n: RailNotification) => Promise<NotificationAnswer>,
  notifications: RailNotification[],
): Promise<BatchOutcome<NotificationAnswer>[]> {
  const outcomes = new Map<RailNotification, BatchOutcome<NotificationAnswer>>();
  const each = (list: readonly RailNotification[]) =>
    Promise.all(
      list.map((n) =>
        one(n).then(
          (answer) => void outcomes.set(n, { ok: true, value: answer }),
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
