import { randomUUID } from 'node:crypto';
import { BASE_UNITS_PER_CENT } from '../../lib/money.js';
import type { InfractionDecision } from '../rail.js';
import type { SimDelivery } from './delivery.js';
import type { SimEngine } from './engine.js';
import * as infractions from './infractions.js';
import type { SandboxOutcome, SimulatorOptions } from './options.js';
import * as store from './store.js';

/**
 * MED at the simulated rail: the payer's side reports infractions against PIX this institution
 * received, and the central bank resolves them (sandbox calls; table `sim_infractions`,
 * infractions.ts). The notifications of one payment (its credit, its infractions) are delivered in
 * that order; each call answers once its notification has been delivered.
 */
export class SimInfractions {
  constructor(
    private readonly options: SimulatorOptions,
    private readonly engine: SimEngine,
    private readonly delivery: SimDelivery,
  ) {}

  /**
   * POST /infractions: the payer's side reports an infraction (MED) against a PIX this institution
   * received, claiming `amount` (default: all of the payment not returned yet). Resolves once the
   * notification has been delivered (the service placed its block), with the infraction's id.
   */
  async report(input: { endToEndId: string; amount: number | undefined; reason: string }): Promise<SandboxOutcome<{ id: string }>> {
    const outcome = await this.options.db.transaction(async (tx): Promise<SandboxOutcome<{ id: string; notificationId: string }>> => {
      const payment = await store.findPayment(tx, input.endToEndId, true);
      if (!payment || payment.kind !== 'payment' || payment.direction !== 'inbound' || payment.receiver_account_id === null || payment.status !== 'settled') {
        return { ok: false, reason: 'not_found', detail: 'No PIX received by this institution has that end_to_end_id' };
      }
      const open = await infractions.findOpenInfraction(tx, payment.end_to_end_id);
      if (open) return { ok: false, reason: 'conflict', detail: `The payment already has an open infraction (${open.id})` };
      const remaining = payment.amount - payment.returned_amount;
      if (remaining <= 0) return { ok: false, reason: 'unprocessable', detail: 'The payment was returned in full; nothing is left to claim' };
      const amount = input.amount ?? remaining;
      if (amount > remaining) {
        const cents = (v: number) => v / BASE_UNITS_PER_CENT; // amounts of the rail are whole cents
        return {
          ok: false,
          reason: 'unprocessable',
          detail: `amount exceeds what can still be returned of the payment (${cents(remaining)} of ${cents(payment.amount)} cents)`,
        };
      }
      const now = this.options.clock.now();
      const id = randomUUID();
      await infractions.insertInfraction(tx, { id, end_to_end_id: payment.end_to_end_id, amount, reason: input.reason, created_at: now });
      const notificationId = await this.delivery.notify(tx, now, payment.end_to_end_id, {
        kind: 'infraction.reported',
        infractionId: id,
        endToEndId: payment.end_to_end_id,
        amount,
        reason: input.reason,
        reportedAt: now,
      });
      return { ok: true, value: { id, notificationId } };
    });
    if (!outcome.ok) return outcome;
    await this.engine.deliverNow([outcome.value.notificationId]);
    return { ok: true, value: { id: outcome.value.id } };
  }

  /** POST /infractions/:id/resolve: the final decision on an open infraction, delivered before answering. */
  async resolve(id: string, decision: InfractionDecision): Promise<SandboxOutcome> {
    const outcome = await this.options.db.transaction(async (tx): Promise<SandboxOutcome<string>> => {
      const row = await infractions.lockInfraction(tx, id);
      if (!row) return { ok: false, reason: 'not_found', detail: 'Infraction not found' };
      if (row.status !== 'OPEN') return { ok: false, reason: 'conflict', detail: `The infraction is already ${row.status}` };
      const now = this.options.clock.now();
      await infractions.resolveInfraction(tx, id, decision, now);
      const notificationId = await this.delivery.notify(tx, now, row.end_to_end_id, {
        kind: 'infraction.resolved',
        infractionId: id,
        endToEndId: row.end_to_end_id,
        decision,
        resolvedAt: now,
      });
      return { ok: true, value: notificationId };
    });
    if (!outcome.ok) return outcome;
    await this.engine.deliverNow([outcome.value]);
    return { ok: true, value: undefined };
  }
}
