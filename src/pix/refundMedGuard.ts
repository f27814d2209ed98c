import type { Sql } from '../db/db.js';
import type { OwnedTransaction } from './repository.js';

/**
 * Refund rule 5: a refund triggered by an infraction notification (`pix.refund.requested`) is
 * executed automatically by the MED flow and must not be requested through POST /pix/refund.
 *
 * Hook for the MED work: when `original` has an open infraction whose refund the MED flow will
 * execute, throw `unprocessable('…', { worked: true })` here. POST /pix/refund calls it under the
 * account lock, before any money moves. Until infractions exist there is nothing to refuse.
 */
export async function assertRefundNotMedTriggered(_tx: Sql, _original: OwnedTransaction): Promise<void> {}
