import { afterCommit } from '../../db/db.js';
import { Batcher, type BatchOutcome } from '../../lib/batcher.js';
import { monotonicNow } from '../../lib/clock.js';
import type { PaymentAck, PaymentOrder, ReturnAck, ReturnOrder } from '../rail.js';
import type { SimEngine } from './engine.js';
import { batchOptions, type SimulatorOptions } from './options.js';
import { REJECTION, returnProblem } from './returnRules.js';
import * as store from './store.js';

/**
 * The simulator's SPI intake: the payment and return orders this institution sends. A payment is
 * judged by the receiving key's directory entry (sandbox `/dict/keys`): `settle` (after
 * SIM_SETTLEMENT_MS), `reject`, `hold` (until a sandbox call), `timeout` (the order is refused,
 * nothing recorded); `fraud_flagged` queues it for SIM_PROTECTION_MS before that. Returns are
 * judged by the spec's return codes and deadlines. What is taken is left to the engine (engine.ts)
 * with a due time and a wake-up; the answer comes after the stall switch (sandbox PUT /rail/stall).
 */
export class SpiIntake {
  /** Concurrent payment orders of the cash-out path, answered by one statement (issue 12). */
  private readonly orders: Batcher<PaymentOrder, store.Taken>;

  constructor(
    private readonly options: SimulatorOptions,
    private readonly engine: SimEngine,
  ) {
    this.orders = new Batcher({ ...batchOptions(options, 'sim_order'), run: (orders) => this.takePayments(orders) });
  }

  /**
   * The order taken together with the others of its batch (`takePayments`, one statement); then
   * the answer after the stall switch, each caller on its own (a delayed answer never holds the
   * batcher up).
   */
  async sendPayment(order: PaymentOrder): Promise<PaymentAck> {
    const taken = await this.orders.submit(order);
    // An order already taken is acknowledged as it was the first time (queued by protection stays
    // "queued" after the payment left the queue: the rail is idempotent on the end-to-end id). A
    // key with behaviour `timeout`: the rail does not take new orders for it.
    const ack: PaymentAck = { status: taken.ack ?? 'timeout' };
    if (taken.stall.drop) return new Promise<PaymentAck>(() => {});
    if (taken.stall.delay_ms > 0) await new Promise((r) => setTimeout(r, taken.stall.delay_ms).unref());
    return ack;
  }

  async sendReturn(order: ReturnOrder): Promise<ReturnAck> {
    return this.answerAfterStall(await this.takeReturn(order));
  }

  /**
   * The stall switch (sandbox PUT /rail/stall): the order has been taken (it is processed as usual),
   * and only its answer is late — by `delay_ms` — or lost (`drop`), as on a real network.
   */
  private async answerAfterStall<T>(ack: T): Promise<T> {
    const stall = await store.readStall(this.options.db);
    if (stall.drop) return new Promise<T>(() => {});
    if (stall.delay_ms > 0) await new Promise((r) => setTimeout(r, stall.delay_ms).unref());
    return ack;
  }

  /**
   * One statement for the orders of a batch (store.takeOutboundPayments): the directory entries,
   * the payments inserted (or the ones already taken under their end-to-end ids), the stall switch.
   * If it fails, each order is taken alone (a statement of one), so that one bad order (a
   * transaction id another order took) does not refuse the others.
   */
  private async takePayments(orders: PaymentOrder[]): Promise<BatchOutcome<store.Taken>[]> {
    const { db, clock, institutionIspb } = this.options;
    this.engine.lookForBackwardStep();
    const now = clock.now();
    const terms: store.TakeTerms = {
      created_at: now,
      protectionDue: new Date(now.getTime() + this.options.protectionMs),
      settlementDue: new Date(now.getTime() + this.options.settlementMs),
      institutionIspb,
      refusals: { keyNotFound: REJECTION.keyNotFound.code, sameInstitution: REJECTION.sameInstitution.code },
    };
    const wake = (taken: store.Taken) => {
      // This process's engine settles it when due (a crash: another process's safety-net poll).
      if (taken.inserted) this.engine.wakeAt(monotonicNow() + (taken.ack === 'queued' ? this.options.protectionMs : this.options.settlementMs));
      return taken;
    };
    try {
      return (await store.takeOutboundPayments(db, orders.map(outboundOrder), terms)).map((taken) => ({ ok: true, value: wake(taken) }));
    } catch (err) {
      if (orders.length === 1) throw err;
      return Promise.all(
        orders.map((order) =>
          store.takeOutboundPayments(db, [outboundOrder(order)], terms).then(
            ([taken]): BatchOutcome<store.Taken> => ({ ok: true, value: wake(taken!) }),
            (error: unknown): BatchOutcome<store.Taken> => ({ ok: false, error }),
          ),
        ),
      );
    }
  }

  private async takeReturn(order: ReturnOrder): Promise<ReturnAck> {
    const { db, clock } = this.options;
    this.engine.lookForBackwardStep();
    const existing = await store.findPayment(db, order.endToEndId);
    if (existing) return existing.status === 'settled' ? { status: 'settled', settledAt: existing.resolved_at! } : { status: 'accepted' };
    return db.transaction(async (tx) => {
      const now = clock.now();
      const original = await store.findPayment(tx, order.originalEndToEndId, true);
      const problem =
        !original || original.direction !== 'inbound'
          ? REJECTION.originalNotFound
          : returnProblem({
              returnCode: order.returnCode,
              originalAt: original.created_at,
              now,
              amount: order.amount,
              remaining: original.amount - original.returned_amount,
            });
      // A valid return settles after SIM_SETTLEMENT_MS, or at once when that is 0; an invalid one
      // is accepted and rejected later, as the central bank does.
      const settleNow = problem === null && this.options.settlementMs === 0;
      const { row, inserted } = await store.insertPayment(tx, {
        end_to_end_id: order.endToEndId,
        kind: 'return',
        direction: 'outbound',
        transaction_id: order.transactionId,
        original_end_to_end_id: order.originalEndToEndId,
        amount: order.amount,
        payer_name: original?.receiver_name ?? null,
        payer_document: original?.receiver_document ?? null,
        payer_ispb: this.options.institutionIspb,
        payer_account_id: original?.receiver_account_id ?? null,
        receiver_name: original?.payer_name ?? null,
        receiver_document: original?.payer_document ?? null,
        receiver_ispb: original?.payer_ispb ?? '00000000',
        behavior: problem ? 'reject' : 'settle',
        reason_code: problem?.code ?? null,
        return_code: order.returnCode,
        description: order.description,
        status: settleNow ? 'settled' : 'in_flight',
        due_at: settleNow ? null : new Date(now.getTime() + this.options.settlementMs),
        created_at: now,
        resolved_at: settleNow ? now : null,
      });
      if (inserted && problem === null) await store.addReturned(tx, order.originalEndToEndId, order.amount);
      if (inserted && row.due_at !== null) afterCommit(tx, () => this.engine.wakeAt(monotonicNow() + this.options.settlementMs));
      return row.status === 'settled' ? { status: 'settled', settledAt: row.resolved_at! } : { status: 'accepted' };
    });
  }
}

function outboundOrder(order: PaymentOrder): store.OutboundOrder {
  return {
    end_to_end_id: order.endToEndId,
    transaction_id: order.transactionId,
    amount: order.amount,
    payer_name: order.payer.name,
    payer_document: order.payer.document,
    payer_ispb: order.payer.ispb,
    payer_account_id: order.payer.accountId,
    receiver_key: order.receiverKey,
    description: order.description,
    txid: order.txid,
  };
}
