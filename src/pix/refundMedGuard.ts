import type { Sql } from '../db/db.js';
import { DomainError } from '../errors/catalog.js';
import { hasOpenInfraction } from '../med/repository.js';
import type { OwnedTransaction } from './repository.js';

export const MED_REFUND_REFUSED = 'transaction has an open MED infraction: its refund is executed automatically when the infraction is resolved';

/**
 * Refund rule 5: a refund triggered by an infraction notification (`pix.refund.requested`) is
 * executed automatically by the MED flow and must not be requested through POST /pix/refund. While
 * the original has an infraction not resolved yet (OPEN or defense_submitted), a voluntary refund
 * of it is refused with 422 (`worked: false`). POST /pix/refund calls this under the account lock,
 * before any money moves; an infraction is created and resolved under the same lock, so the answer
 * cannot go stale before the refund is written.
 */
export async function assertRefundNotMedTriggered(tx: Sql, original: OwnedTransaction): Promise<void> {
  if (await hasOpenInfraction(tx, original.id)) throw new DomainError('unprocessable_entity', { message: MED_REFUND_REFUSED });
}
