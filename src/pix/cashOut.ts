import { DomainError } from '../errors/catalog.js';
import * as merchants from '../merchants/repository.js';
import type { CashOutCommand } from './cashOutCommand.js';
import { reserveInBatch } from './cashOut/reserve.js';
import { repeat, resume } from './cashOut/resume.js';
import { submit } from './cashOut/submit.js';
import type { CashOutAnswer, CashOutCaller, CashOutKey } from './cashOut/types.js';
import type { CashOutDeps } from './deps.js';
import * as repo from './repository.js';

/**
 * POST /pix/cash-out, in three steps, each atomic (one statement or one transaction), and the rail
 * call between them (never inside a transaction):
 *
 *   1 reserve   external_id, limits and safe balance checks; the record (stage 1, payment_status
 *               processing) and the reservation available -> pending — one statement that
 *               writes if the account's figures and configuration let it through (for an account
 *               this process has read before), else a read and one statement that writes if the
 *               account did not change meanwhile (else under the account lock), shared by the
 *               concurrent cash-outs of this process (a batch: reserveInBatch); an account whose
 *               books are held elsewhere waits apart (WaitLanes) and one item the database refuses
 *               fails alone (reserveIsolated)
 *   2 send      rail.sendPayment (idempotent on the end-to-end id)
 *   3 record    the rail's answer: accepted (stage 2, pix.payout.processing, HTTP 200) or queued
 *               (stage 2, pix.payout.queued, HTTP 202), with the idempotency answer; or timeout
 *               (reservation released, failed and resumable, HTTP 400 provider_timeout)
 *
 * A crash between 1 and 3 leaves a stage-1 record: the recovery worker sends it again, and a repeat
 * of the request (same external_id, or same Idempotency-Key: step 1 binds the key to the record in
 * the record's own transaction) resumes it. Outcomes arrive later as rail notifications
 * (payouts.ts).
 */

// The cash-out's phases, one file each (src/pix/cashOut/): types (request, answer, bounds), reserve
// (step 1 in batches) with its strategies reserveUnread and reserveLocked, the wait lanes, decide
// (the checks), reservation, resume (repeats and retries), submit (steps 2 and 3).
export { applyPaymentAck, paymentOrder } from './cashOut/submit.js';
export { releaseReservation } from './cashOut/reservation.js';
export {
  CASH_OUT_BATCH_LINGER_MS,
  CASH_OUT_BATCH_MAX,
  CASH_OUT_QUEUE_MAX,
  cashOutAnswer,
  WAIT_LANE_MAX,
  WAIT_LANES_MAX,
  WAIT_LANES_RUNNING,
  type CashOutAnswer,
  type CashOutCaller,
  type CashOutKey,
  type CashOutResponse,
  type RecordAnswer,
} from './cashOut/types.js';

export async function cashOut(ctx: CashOutDeps, caller: CashOutCaller, cmd: CashOutCommand, key: CashOutKey): Promise<CashOutAnswer> {
  if (key.resumes !== null) {
    // An earlier attempt under this Idempotency-Key created the order: continue it, create none.
    const bound = await repo.findById(ctx.db, key.resumes);
    if (bound && bound.kind === 'cash_out' && bound.account_id === caller.accountId) return resume(ctx, bound, key);
  }
  let destination;
  try {
    destination = await resolveDestination(ctx, caller, cmd.key);
  } catch (err) {
    // A repeated command answers with its original order even if its key has changed since.
    const existing = cmd.externalId === null ? undefined : await repo.findByExternalId(ctx.db, caller.accountId, cmd.externalId);
    if (existing) return repeat(ctx, existing, cmd, key);
    throw err;
  }
  const reserved = await reserveInBatch(ctx, { caller, cmd, key, destination });
  if ('existingId' in reserved) {
    const existing = await repo.findById(ctx.db, reserved.existingId);
    if (!existing) throw new Error(`transaction ${reserved.existingId} disappeared`);
    return repeat(ctx, existing, cmd, key);
  }
  if ('sameAs' in reserved) return repeat(ctx, reserved.sameAs, cmd, key);
  return submit(ctx, reserved.row, key);
}

/** The receiver of a key, or the cash-out error that forbids paying it. */
async function resolveDestination(ctx: CashOutDeps, caller: CashOutCaller, key: string) {
  const entry = await ctx.rail.directory.lookupKey(key);
  if (!entry) throw new DomainError('destination_not_found', { detail: `PIX key ${key} is not registered in the directory` });
  if (entry.accountId === null && entry.ispb !== ctx.config.institutionIspb) return entry;
  // The key belongs to this institution: to one of the caller's accounts (or, for a key registered
  // in the sandbox with this ISPB, to the caller's document), or to someone else here.
  const own =
    entry.accountId !== null
      ? (await merchants.findAccount(ctx.db, entry.accountId))?.merchant_id === caller.merchantId
      : (await merchants.findMerchant(ctx.db, caller.merchantId))?.document === entry.document;
  if (own) throw new DomainError('self_transfer', { detail: 'The key belongs to your own account; move money between your accounts with a TEF: POST /api/external/tef/transfers' });
  throw new DomainError('same_institution_transfer', { detail: 'The key belongs to an account of this institution; use a TEF: POST /api/external/tef/transfers with this pix_key' });
}
