import type { AppContext } from '../context.js';
import { badRequest } from '../http/errors.js';
import { centsToBaseUnits } from '../lib/money.js';
import { MED } from '../med/infractions.js';
import { medRecord } from '../med/merchant.js';
import * as med from '../med/repository.js';
import * as merchants from '../merchants/repository.js';
import * as pix from '../pix/repository.js';
import type { InfractionDecision } from '../rail/rail.js';
import { SimulatedRail } from '../rail/sim/simulatedRail.js';
import { ORIGINAL_TRANSACTION_ID, type RecordRow } from '../transactions/repository.js';
import { transactionRecord } from '../transactions/views.js';
import { findRefusalByEndToEndId } from '../pix/railRefusals.js';
import { creditedOrRefused, unwrap } from './outcome.js';

/**
 * The sandbox's simulations of the other side of the PIX network, as functions: the sandbox API
 * (operator token, src/sandbox/*.routes.ts) and the merchant portal's sandbox panel (the merchant's
 * key, src/portal/pages/sandbox.ts) both call them, each with its own authorization and its own record of
 * who acted. Each returns after the service applied its effect; refusals are business errors.
 */

/** The rail simulator, or null when the rail is not simulated (no sandbox). */
export function simulator(ctx: AppContext): SimulatedRail | null {
  return ctx.rail instanceof SimulatedRail ? ctx.rail : null;
}

export interface InboundInput {
  accountId: number;
  amountCents: number;
  payerName?: string | undefined;
  payerDocument?: string | undefined;
  payerIspb?: string | undefined;
  description?: string | undefined;
}

/** An incoming PIX to an account, settled at once (`pix.charge.paid`). */
export async function receiveInbound(ctx: AppContext, sim: SimulatedRail, input: InboundInput) {
  if (!(await merchants.findAccount(ctx.db, input.accountId))) throw badRequest({ account_id: ['does not exist'] });
  const endToEndId = await sim.simulateInboundPayment({
    accountId: input.accountId,
    amount: centsToBaseUnits(input.amountCents),
    payerName: input.payerName,
    payerDocument: input.payerDocument,
    payerIspb: input.payerIspb,
    description: input.description,
  });
  const row = await creditedOrRefused(ctx, endToEndId);
  return { transaction_id: row.transaction_id, end_to_end_id: row.end_to_end_id, amount: row.amount };
}

async function infractionView(ctx: AppContext, id: string) {
  const row = await med.findInfraction(ctx.db, id);
  if (!row) throw new Error(`infraction ${id} was not applied in time`);
  return medRecord(row);
}

/** The payer's side reports an infraction against a PIX this institution received. */
export async function openInfraction(ctx: AppContext, sim: SimulatedRail, input: { endToEndId: string; amountCents?: number | undefined; reason?: string | undefined }) {
  const { id } = unwrap(
    await sim.reportInfraction({
      endToEndId: input.endToEndId,
      amount: input.amountCents === undefined ? undefined : centsToBaseUnits(input.amountCents),
      reason: input.reason ?? MED.defaultReason,
    }),
  );
  return infractionView(ctx, id);
}

/** The central bank's final decision on an infraction. */
export async function resolveInfraction(ctx: AppContext, sim: SimulatedRail, id: string, decision: InfractionDecision) {
  unwrap(await sim.resolveInfraction(id, decision));
  return infractionView(ctx, id);
}

async function payoutView(ctx: AppContext, transactionId: string) {
  const [row] = await ctx.db.query<RecordRow>(`SELECT *, ${ORIGINAL_TRANSACTION_ID} FROM transactions WHERE transaction_id = $1`, [transactionId]);
  return transactionRecord(row!);
}

/** A held or accepted payout settles, or is rejected, now. */
export async function decidePayout(ctx: AppContext, sim: SimulatedRail, transactionId: string, decision: 'settle' | 'reject') {
  unwrap(await sim.decidePayment(transactionId, decision));
  return payoutView(ctx, transactionId);
}

/** The receiver returns a settled payout (all of it, or `amountCents`). */
export async function returnPayout(ctx: AppContext, sim: SimulatedRail, transactionId: string, amountCents: number | undefined) {
  const amount = amountCents === undefined ? undefined : centsToBaseUnits(amountCents);
  const result = unwrap(await sim.returnPayment(transactionId, amount));
  const payout = await payoutView(ctx, transactionId);
  if (!result.returned) {
    return { returned: false as const, end_to_end_id: result.endToEndId, detail: 'The central bank refused the return: the amount exceeds what remains of the payout', payout };
  }
  const [back] = await ctx.db.query<{ transaction_id: string; amount: number }>('SELECT transaction_id, amount FROM transactions WHERE end_to_end_id = $1', [result.endToEndId]);
  const refused = back ? undefined : await findRefusalByEndToEndId(ctx.db, result.endToEndId);
  if (refused) {
    return { returned: false as const, end_to_end_id: result.endToEndId, detail: `This institution refused the return (${refused.reason_code}): ${refused.reason}`, payout };
  }
  return { returned: true as const, transaction_id: back?.transaction_id ?? null, end_to_end_id: result.endToEndId, amount: back?.amount ?? amount ?? null, payout };
}
