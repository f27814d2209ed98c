import type { Sql } from '../../db/db.js';
import { bankName } from '../../lib/banks.js';
import type { DirectoryEntry } from '../rail.js';
import type { SimDelivery } from './delivery.js';
import type { SimEngine } from './engine.js';
import type { SandboxOutcome, SimulatorOptions } from './options.js';
import { randomPayer, type SeededRandom } from './random.js';
import { REJECTION } from './returnRules.js';
import * as store from './store.js';

/**
 * The sandbox controls of the simulated rail (contract section 4), what the other participants
 * and the central bank do when a test says so: the stall switch, other institutions' directory
 * keys, deciding and returning payouts, PIX sent to this institution's accounts. (MED infractions:
 * med.ts.) A control that queues a notification answers once it has been delivered.
 */
export class SandboxControls {
  constructor(
    private readonly options: SimulatorOptions,
    private readonly engine: SimEngine,
    private readonly delivery: SimDelivery,
    private readonly random: SeededRandom,
  ) {}

  /** GET /rail/stall. */
  readStall(): Promise<store.RailStall> {
    return store.readStall(this.options.db);
  }

  /** PUT /rail/stall; `{delay_ms: 0, drop: false}` clears it. */
  setStall(stall: store.RailStall): Promise<store.RailStall> {
    return store.writeStall(this.options.db, stall, this.options.clock.now());
  }

  /** POST /dict/keys: registers (or re-registers) a key of another institution. */
  async registerForeignKey(
    entry: Pick<DirectoryEntry, 'key' | 'type' | 'name' | 'document' | 'ispb' | 'bankName' | 'fraudFlagged'> & { behavior: store.SimBehavior },
  ): Promise<SandboxOutcome<{ row: store.DictRow; created: boolean }>> {
    const result = await store.upsertForeignKey(this.options.db, {
      key: entry.key,
      type: entry.type,
      name: entry.name,
      document: entry.document,
      ispb: entry.ispb,
      bank_name: entry.bankName ?? bankName(entry.ispb, { ispb: this.options.institutionIspb, name: this.options.institutionName }),
      behavior: entry.behavior,
      fraud_flagged: entry.fraudFlagged,
    });
    if (result === 'owned') return { ok: false, reason: 'conflict', detail: 'PIX key belongs to an account of this institution' };
    return { ok: true, value: result };
  }

  /** POST /payouts/:transaction_id/settle|reject: decides a held or accepted payment now. */
  async decidePayment(transactionId: string, decision: 'settle' | 'reject'): Promise<SandboxOutcome<{ endToEndId: string }>> {
    const outcome = await this.options.db.transaction(async (tx): Promise<SandboxOutcome<{ endToEndId: string; notificationId: string }>> => {
      const row = await store.findOutboundPaymentByTransactionId(tx, transactionId);
      if (!row) return { ok: false, reason: 'not_found', detail: 'Payout not found' };
      if (row.status !== 'in_flight' && row.status !== 'held') {
        return { ok: false, reason: 'conflict', detail: `Payout is ${row.status === 'protection' ? 'queued by protection' : row.status}; only a held or accepted payout can be decided` };
      }
      const now = this.options.clock.now();
      const notificationId =
        decision === 'settle' ? await this.engine.settle(tx, row, now) : await this.engine.reject(tx, row, now, REJECTION.byReceiver);
      return { ok: true, value: { endToEndId: row.end_to_end_id, notificationId } };
    });
    if (!outcome.ok) return outcome;
    await this.engine.deliverNow([outcome.value.notificationId]);
    return { ok: true, value: { endToEndId: outcome.value.endToEndId } };
  }

  /**
   * POST /payouts/:transaction_id/return: the receiver returns (part of) a settled payment. An
   * amount beyond what remains is refused by the rail (`payment.return_rejected`, no money back).
   */
  async returnPayment(transactionId: string, amount: number | undefined): Promise<SandboxOutcome<{ returned: boolean; endToEndId: string }>> {
    const outcome = await this.options.db.transaction(
      async (tx): Promise<SandboxOutcome<{ returned: boolean; endToEndId: string; notificationId: string }>> => {
        const payment = await store.findOutboundPaymentByTransactionId(tx, transactionId);
        if (!payment) return { ok: false, reason: 'not_found', detail: 'Payout not found' };
        if (payment.status !== 'settled') return { ok: false, reason: 'conflict', detail: `Payout is ${payment.status}; only a settled payout can be returned` };
        const now = this.options.clock.now();
        const remaining = payment.amount - payment.returned_amount;
        const value = amount ?? remaining;
        const returnE2e = this.random.endToEndId('D', payment.receiver_ispb, now);
        if (value <= 0 || value > remaining) {
          const notificationId = await this.delivery.notify(tx, now, payment.end_to_end_id, {
            kind: 'payment.return_rejected',
            endToEndId: payment.end_to_end_id,
            attemptId: returnE2e,
            amount: value,
            reasonCode: REJECTION.amountExceeded.code,
            reason: REJECTION.amountExceeded.reason,
          });
          return { ok: true, value: { returned: false, endToEndId: returnE2e, notificationId } };
        }
        const returnId = await this.insertReturnOf(tx, payment, value, returnE2e, now);
        const notificationId = await this.delivery.notify(tx, now, payment.end_to_end_id, {
          kind: 'payment.returned',
          endToEndId: payment.end_to_end_id,
          returnEndToEndId: returnId,
          amount: value,
          returnCode: 'MD06',
          reason: 'Devolução PIX',
          returnedAt: now,
        });
        return { ok: true, value: { returned: true, endToEndId: returnId, notificationId } };
      },
    );
    if (!outcome.ok) return outcome;
    await this.engine.deliverNow([outcome.value.notificationId]);
    return { ok: true, value: { returned: outcome.value.returned, endToEndId: outcome.value.endToEndId } };
  }

  /** The receiver's return of `value` of a settled payment, settled at once, under `firstId` or a fresh id; returns its id. */
  private async insertReturnOf(tx: Sql, payment: store.SimPaymentRow, value: number, firstId: string, now: Date): Promise<string> {
    let drawn = 0;
    const returnId = await this.insertWithFreshId(tx, () => (drawn++ === 0 ? firstId : this.random.endToEndId('D', payment.receiver_ispb, now)), (id) => ({
      end_to_end_id: id,
      kind: 'return',
      direction: 'inbound',
      original_end_to_end_id: payment.end_to_end_id,
      amount: value,
      payer_name: payment.receiver_name,
      payer_document: payment.receiver_document,
      payer_ispb: payment.receiver_ispb,
      receiver_name: payment.payer_name,
      receiver_document: payment.payer_document,
      receiver_ispb: payment.payer_ispb,
      receiver_account_id: payment.payer_account_id,
      return_code: 'MD06',
      status: 'settled',
      created_at: now,
      resolved_at: now,
    }));
    await store.addReturned(tx, payment.end_to_end_id, value);
    return returnId;
  }

  /**
   * Inserts a payment under a freshly drawn end-to-end id, drawing again while the id is taken. The
   * draws follow SIM_SEED, so a process restarted with the same seed draws ids it already used (in
   * the same minute, the ids' time stamp); keeping the old payment would silently lose the new one.
   */
  private async insertWithFreshId(tx: Sql, draw: () => string, payment: (id: string) => store.NewSimPayment): Promise<string> {
    for (let attempt = 0; attempt < 100; attempt++) {
      const id = draw();
      if ((await store.insertPayment(tx, payment(id))).inserted) return id;
    }
    throw new Error('rail simulator: no free end-to-end id after 100 draws');
  }

  /**
   * POST /pix/inbound: a PIX from a payer of another institution to one of this institution's
   * accounts, settled at once. Missing payer fields are drawn from the seeded generator. Resolves
   * once the notification has been delivered (the account is credited), with its end-to-end id.
   */
  async simulateInboundPayment(input: {
    accountId: number;
    amount: number;
    payerName?: string | undefined;
    payerDocument?: string | undefined;
    payerIspb?: string | undefined;
    description?: string | undefined;
    txid?: string | undefined;
  }): Promise<string> {
    const drawn = randomPayer(this.random);
    const payer = { name: input.payerName ?? drawn.name, document: input.payerDocument ?? drawn.document, ispb: input.payerIspb ?? drawn.ispb };
    const now = this.options.clock.now();
    let endToEndId = '';
    const notificationId = await this.options.db.transaction(async (tx) => {
      endToEndId = await this.insertWithFreshId(tx, () => this.random.endToEndId('E', payer.ispb, now), (id) => ({
        end_to_end_id: id,
        kind: 'payment',
        direction: 'inbound',
        amount: input.amount,
        payer_name: payer.name,
        payer_document: payer.document,
        payer_ispb: payer.ispb,
        receiver_ispb: this.options.institutionIspb,
        receiver_account_id: input.accountId,
        status: 'settled',
        description: input.description ?? null,
        txid: input.txid ?? null,
        created_at: now,
        resolved_at: now,
      }));
      return this.delivery.notify(tx, now, endToEndId, {
        kind: 'inbound.payment',
        endToEndId,
        amount: input.amount,
        receiverAccountId: input.accountId,
        payer,
        description: input.description ?? null,
        txid: input.txid ?? null,
        receivedAt: now,
      });
    });
    await this.engine.deliverNow([notificationId]);
    return endToEndId;
  }
}
