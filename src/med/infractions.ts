import type { AppContext } from '../context.js';
import type { Sql } from '../db/db.js';
import { lockAccount } from '../ledger/ledger.js';
import { isoZ } from '../lib/clock.js';
import { TX_PREFIX } from '../lib/ids.js';
import { refundTotalsBody } from '../pix/events.js';
import { returnRecord } from '../pix/refund.js';
import * as pix from '../pix/repository.js';
import type { OwnedTransaction } from '../pix/repository.js';
import type { RailNotification } from '../rail/rail.js';
import { insertTransaction } from '../transactions/repository.js';
import { coverShortBlocks, moveBlock } from './blocks.js';
import { emitMedEvent, infractionBody, refundRequestBody } from './events.js';
import * as repo from './repository.js';
import type { InfractionRow } from './repository.js';

/**
 * The MED flow as the rail drives it (docs/med.md). Each notification is applied in the handler's
 * one transaction (state, ledger, records and events together) and is idempotent: a redelivery
 * finds the infraction already created, or already resolved, and does nothing.
 *
 *   infraction.reported   OPEN, block what the available balance has (the rest as money comes in),
 *                         pix.infraction.created + pix.refund.requested
 *   infraction.resolved   accepted: CLOSED, the blocked funds become a MED return (MEDRET… / D…,
 *                                   sent to the rail after commit; settles blocked -> central bank,
 *                                   pix.refund.completed), pix.infraction.resolved
 *                         rejected: CLOSED; cancelled: CANCELLED — block released, pix.infraction.resolved
 *                                   and pix.refund.completed (status completed: nothing refunded)
 */
export const MED = {
  /** How long the merchant has to submit a defense: the receiving institution's MED analysis window. */
  defenseWindowMs: 7 * 86_400_000,
  defaultReason: 'fraud',
  refundKind: 'med_refund',
  refundDescription: 'Devolução MED',
} as const;

/** Kinds of record that are a PIX the merchant received (a paid cash-in charge is one too). */
const RECEIVED_KINDS = new Set(['pix_in', 'charge']);

/** Return reason code of a MED refund: BE08 for an operational flaw of the payer's institution, else FR01 (fraud). */
export function medReturnCode(reason: string): 'BE08' | 'FR01' {
  return reason === 'operational_flaw' ? 'BE08' : 'FR01';
}

type Of<K extends RailNotification['kind']> = Extract<RailNotification, { kind: K }>;

export async function onInfractionReported(tx: Sql, ctx: AppContext, n: Of<'infraction.reported'>): Promise<void> {
  const original = await pix.findByEndToEndId(tx, n.endToEndId);
  if (!original || original.direction !== 'inbound' || !RECEIVED_KINDS.has(original.kind)) {
    ctx.log.error({ infraction_id: n.infractionId, end_to_end_id: n.endToEndId }, 'infraction about a PIX this institution did not credit; ignored');
    return;
  }
  await lockAccount(tx, original.account_id);
  const inserted = await repo.insertInfraction(tx, {
    id: n.infractionId,
    accountId: original.account_id,
    originalId: original.id,
    endToEndId: n.endToEndId,
    reason: n.reason,
    amount: Math.min(n.amount, original.amount),
    defenseDeadline: new Date(n.reportedAt.getTime() + MED.defenseWindowMs),
    createdAt: n.reportedAt,
  });
  if (!inserted) return;
  const now = ctx.clock.now();
  await coverShortBlocks(tx, original.account_id, now);
  const infraction = (await repo.findInfraction(tx, n.infractionId))!;
  await emitMedEvent(tx, infraction, 'pix.infraction.created', infractionBody(infraction));
  await emitMedEvent(tx, infraction, 'pix.refund.requested', {
    ...refundRequestBody(infraction),
    transaction_id: null,
    end_to_end_id: null,
    amount: infraction.amount,
    requested_at: isoZ(n.reportedAt),
  });
}

/**
 * Applies the final decision. Returns the MED refund record to send to the rail once this
 * transaction has committed (accepted with funds blocked), or null.
 */
export async function onInfractionResolved(tx: Sql, ctx: AppContext, n: Of<'infraction.resolved'>): Promise<OwnedTransaction | null> {
  const found = await repo.findInfraction(tx, n.infractionId);
  if (!found) {
    ctx.log.error({ infraction_id: n.infractionId }, 'decision on an unknown infraction; ignored');
    return null;
  }
  await lockAccount(tx, found.account_id);
  const infraction = await repo.lockInfraction(tx, found.id);
  if (!repo.OPEN_STATUSES.includes(infraction.status)) return null;
  const now = ctx.clock.now();
  const status = n.decision === 'cancelled' ? 'CANCELLED' : 'CLOSED';
  const resolution = { status, decision: n.decision, resolvedAt: n.resolvedAt } as const;

  if (n.decision === 'accepted') {
    // Refund what is blocked, within what the original still allows (refund rule 2); give back the rest.
    const original = (await pix.findById(tx, infraction.original_id))!;
    const totals = await pix.refundTotals(tx, original.id);
    const refundAmount = Math.max(0, Math.min(infraction.blocked_amount, original.amount - totals.open));
    const excess = infraction.blocked_amount - refundAmount;
    const refund = refundAmount > 0 ? await insertMedRefund(tx, ctx, infraction, original, refundAmount, now) : null;
    // The infraction is closed before its excess goes back to available: the ledger's credit
    // primitive then tops up the account's other short blocks with it, never this one.
    await repo.updateInfraction(
      tx,
      infraction.id,
      { ...resolution, blockedDelta: -excess, releasedDelta: excess, refundStatus: refund ? 'processing' : 'released', ...(refund ? { refundId: refund.id } : {}) },
      now,
    );
    if (excess > 0) await moveBlock(tx, 'release', { kind: 'med_release', reference: infraction.id, accountId: infraction.account_id, amount: excess, now });
    const resolved = await repo.findInfraction(tx, infraction.id);
    await emitResolved(tx, resolved!, refundAmount);
    // Nothing to return: nothing was blocked, or refunds already took what the PIX allows (then released).
    if (!refund) await emitNothingRefunded(tx, resolved!, excess > 0 ? 'released' : 'nothing_blocked', now);
    return refund;
  }

  await repo.updateInfraction(
    tx,
    infraction.id,
    { ...resolution, blockedDelta: -infraction.blocked_amount, releasedDelta: infraction.blocked_amount, refundStatus: 'released' },
    now,
  );
  if (infraction.blocked_amount > 0) {
    await moveBlock(tx, 'release', { kind: 'med_release', reference: infraction.id, accountId: infraction.account_id, amount: infraction.blocked_amount, now });
  }
  const resolved = (await repo.findInfraction(tx, infraction.id))!;
  await emitResolved(tx, resolved, 0);
  await emitNothingRefunded(tx, resolved, 'released', now);
  return null;
}

/** The return of an accepted infraction: an outbound PIX record at stage 1, its money still in `blocked`. */
async function insertMedRefund(tx: Sql, ctx: AppContext, infraction: InfractionRow, original: OwnedTransaction, amount: number, now: Date) {
  const row = await insertTransaction(
    tx,
    returnRecord(ctx, original, {
      prefix: TX_PREFIX.medRefund,
      kind: MED.refundKind,
      amount,
      description: MED.refundDescription,
      returnCode: medReturnCode(infraction.reason),
      now,
      infractionId: infraction.id,
    }),
  );
  return { ...row, merchant_id: infraction.merchant_id };
}

async function emitResolved(tx: Sql, infraction: InfractionRow, refundAmount: number): Promise<void> {
  await emitMedEvent(tx, infraction, 'pix.infraction.resolved', {
    ...infractionBody(infraction),
    status: infraction.status,
    decision: infraction.decision,
    refund_amount: refundAmount,
    refund_transaction_id: infraction.refund_transaction_id,
    refund_end_to_end_id: infraction.refund_end_to_end_id,
    resolved_at: isoZ(infraction.resolved_at),
  });
}

/** `pix.refund.completed` with status `completed`: the refund request ended without a return. */
async function emitNothingRefunded(tx: Sql, infraction: InfractionRow, outcome: 'released' | 'nothing_blocked', now: Date): Promise<void> {
  const totals = await pix.refundTotals(tx, infraction.original_id);
  await emitMedEvent(tx, infraction, 'pix.refund.completed', {
    ...refundRequestBody(infraction),
    status: 'completed',
    outcome,
    transaction_id: null,
    end_to_end_id: null,
    amount: 0,
    ...refundTotalsBody(infraction.original_amount, totals.executed, 0),
    is_partial: false,
    completed_at: isoZ(now),
  });
}
