import type { AppContext } from '../context.js';
import { businessError, conflict, notFound, unprocessable } from '../http/errors.js';
import { findRefusalByEndToEndId, REFUSAL } from '../pix/railRefusals.js';
import * as pix from '../pix/repository.js';
import type { SandboxOutcome } from '../rail/sim/simulatedRail.js';

/** The value of a simulator outcome, or its refusal as a business error (404, 409, 422). */
export function unwrap<T>(outcome: SandboxOutcome<T>): T {
  if (outcome.ok) return outcome.value;
  switch (outcome.reason) {
    case 'not_found':
      throw notFound(outcome.detail);
    case 'conflict':
      throw conflict(outcome.detail);
    case 'unprocessable':
      throw unprocessable(outcome.detail);
  }
}

/**
 * The record that credited an incoming payment the sandbox sent (POST /pix/inbound, /pix/pay), or
 * the refusal as the answer: the account could not take the money (past its maximum balance), so
 * this institution refused it back to the payer — 422 `amount_too_large`, as every other credit
 * past the maximum answers, naming the payment and the reason; nothing was credited.
 */
export async function creditedOrRefused(ctx: AppContext, endToEndId: string): Promise<pix.OwnedTransaction> {
  const row = await pix.findByEndToEndId(ctx.db, endToEndId);
  if (row) return row;
  const refused = await findRefusalByEndToEndId(ctx.db, endToEndId);
  if (refused) {
    const detail = `The payment ${endToEndId} was refused back to the payer (${refused.reason_code}): ${refused.reason}`;
    throw refused.reason_code === REFUSAL.balanceLimit.code ? businessError(422, 'amount_too_large', detail) : unprocessable(detail);
  }
  throw new Error(`payment ${endToEndId} was not credited in time`);
}
