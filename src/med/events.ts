import type { Sql } from '../db/db.js';
import { emitEvent } from '../events/outbox.js';
import { isoZ } from '../lib/clock.js';
import type { InfractionRow } from './repository.js';

/**
 * Bodies of the MED events. Every MED event — `pix.infraction.*` and the `pix.refund.*` of the
 * infraction's refund request — has the infraction's id as its outbox subject, so a receiver gets
 * them in the order they happened. Amounts in base units, dates with Z (docs/med.md, "Events").
 */

type Payload = Record<string, unknown>;

/** Writes a MED event in the caller's transaction (`status` defaults to the catalog's, see emitEvent). */
export async function emitMedEvent(tx: Sql, infraction: InfractionRow, event: string, payload: Payload & { status?: string }): Promise<void> {
  await emitEvent(tx, { event, merchantId: infraction.merchant_id, accountId: infraction.account_id, subject: infraction.id, payload });
}

/** What every `pix.infraction.*` event says: the infraction and the PIX it is about. */
export function infractionBody(i: InfractionRow): Payload {
  return {
    infraction_id: i.id,
    transaction_id: i.original_transaction_id,
    end_to_end_id: i.end_to_end_id,
    account_id: i.account_id,
    reason: i.reason,
    amount: i.amount,
    original_amount: i.original_amount,
    blocked_amount: i.blocked_amount,
    refunded_amount: i.refunded_amount,
    released_amount: i.released_amount,
    defense_deadline: isoZ(i.defense_deadline),
    created_at: isoZ(i.created_at),
  };
}

/**
 * What the `pix.refund.*` events of an infraction say besides the refund's own fields: which
 * infraction, what it claims and what is blocked, refunded and released.
 */
export function refundRequestBody(i: InfractionRow): Payload {
  return {
    infraction_id: i.id,
    original_transaction_id: i.original_transaction_id,
    original_end_to_end_id: i.end_to_end_id,
    account_id: i.account_id,
    original_amount: i.original_amount,
    requested_amount: i.amount,
    blocked_amount: i.blocked_amount,
    refunded_amount: i.refunded_amount,
    released_amount: i.released_amount,
  };
}
