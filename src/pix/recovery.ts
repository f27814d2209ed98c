import type { BackgroundWorker } from '../lib/worker.js';
import type { PixDeps } from './deps.js';
import { runsInRealTime } from '../lib/clock.js';
import { periodicWorker } from '../lib/periodic.js';
import { wakeableWorker } from '../lib/wakeable.js';
import { applyPaymentAck, paymentOrder } from './cashOut.js';
import { MED } from '../med/infractions.js';
import { settleMedRefund } from '../med/refunds.js';
import { applyReturnAck, returnOrder } from './refund.js';
import * as repo from './repository.js';

/**
 * The completer: finds cash-outs and refunds (voluntary and MED) accepted here but never acknowledged by the rail
 * (stage 1 for longer than UNSENT_AFTER_MS — the request died between reserving and recording the
 * rail's answer, or the rail did not answer) and sends them again. The rail deduplicates on the
 * end-to-end id, so an order it already has is only acknowledged again. A payment the rail now
 * refuses with a timeout is released and announced with pix.payout.failed (no caller is waiting).
 * It also sends again the orders acknowledged (stage 2) but not final after RECONCILE_AFTER_MS.
 * (Old rail-inbox ids and limit windows are purged by the retention worker, src/retention/.)
 */
export const UNSENT_AFTER_MS = 15_000;

/**
 * How long a record may stay at stage 2 (acknowledged by the rail, not final) before the recovery
 * sends its order again, and then again each time this much has passed. The rail may have lost an
 * order it acknowledged: a failover replaces the primary that took it (or that showed it to a
 * repeat before its standby had it) while pixgate's own record of the acknowledgement, written
 * later and synchronously, survives. Sending again is the check: the rail deduplicates on the
 * end-to-end id, so an order it knows is only acknowledged again (a record held or queued for long
 * costs one order a bound), and one it lost is taken and settles. docs/decisions.md (q2-failover).
 */
export const RECONCILE_AFTER_MS = 30_000;

/** Returns how many stage-1 records it sent again (those at stage 2 are counted in the log only). */
export async function recoverUnsent(
  ctx: PixDeps,
  options: { olderThanMs?: number; reconcileAfterMs?: number; limit?: number } = {},
): Promise<number> {
  const now = ctx.clock.now();
  const limit = options.limit ?? 100;
  const unsent = await repo.claimUnsent(ctx.db, new Date(now.getTime() - (options.olderThanMs ?? UNSENT_AFTER_MS)), now, limit);
  for (const row of unsent) {
    if (await sendAgain(ctx, row)) ctx.log.info({ transaction_id: row.transaction_id }, 'unacknowledged order sent to the rail again');
  }
  const sent = await repo.claimSentUnsettled(ctx.db, new Date(now.getTime() - (options.reconcileAfterMs ?? RECONCILE_AFTER_MS)), now, limit);
  for (const row of sent) await sendAgain(ctx, row);
  if (sent.length > 0) ctx.log.debug({ orders: sent.length }, 'acknowledged orders not final yet sent to the rail again');
  return unsent.length;
}

/**
 * Sends the order of a record again and applies the rail's answer: at stage 1 as the request
 * would have; at stage 2 the answer changes nothing (already acknowledged; a return the rail
 * settles at once is settled), and a payment the rail now refuses to take (`timeout`) stays at
 * stage 2 for the next pass. False when it failed (logged; the next pass tries again).
 */
async function sendAgain(ctx: PixDeps, row: repo.OwnedTransaction): Promise<boolean> {
  try {
    if (row.kind === 'cash_out') {
      const ack = await ctx.rail.sendPayment(paymentOrder(row, ctx.config.institutionIspb));
      await ctx.db.transaction((tx) => applyPaymentAck(tx, ctx, row, ack, { emitTimeoutFailure: true }));
    } else if (row.kind === 'refund' || row.kind === MED.refundKind) {
      const original = (await repo.findById(ctx.db, row.original_id!))!;
      const ack = await ctx.rail.sendReturn(returnOrder(row, original));
      await ctx.db.transaction((tx) => applyReturnAck(tx, ctx, row, ack, row.kind === MED.refundKind ? settleMedRefund : undefined));
    }
    return true;
  } catch (err) {
    ctx.log.error({ err, transaction_id: row.transaction_id }, 'could not send an order to the rail again; will retry');
    return false;
  }
}

/**
 * The recovery worker's longest sleep. Its work comes from requests that died, which cannot tell
 * anyone, so it is found by reading: after each pass it sleeps until the oldest order at stage 1
 * turns UNSENT_AFTER_MS old (read once), and reads again at least this often — an order created
 * meanwhile is stale no sooner than UNSENT_AFTER_MS later, so it is still sent again on time.
 */
export const RECOVERY_SAFETY_NET_MS = UNSENT_AFTER_MS;
/** With a clock other than the system's (tests), the pass runs at this interval instead. */
const RECOVERY_POLL_MS = 5_000;

export function pixWorkers(ctx: PixDeps): BackgroundWorker[] {
  const recovery =
    runsInRealTime(ctx.clock)
      ? wakeableWorker({ name: 'pix-recovery', log: ctx.log, safetyNetMs: RECOVERY_SAFETY_NET_MS }, async () => {
          const limit = 100;
          if ((await recoverUnsent(ctx, { limit })) === limit) return 0; // more waiting
          const oldest = await repo.oldestUnsent(ctx.db);
          if (oldest === null) return undefined;
          // Not before a second from now: an order just sent again is not stale for 15 s, and one
          // stuck at stage 1 (the rail keeps failing) is not tried more than once a second.
          // (An `oldest` in the future was stamped before the wall clock stepped back: claimUnsent
          // takes it past a minute ahead, so no wait is longer than that.)
          return Math.max(1_000, Math.min(60_000, oldest.getTime() + UNSENT_AFTER_MS - ctx.clock.now().getTime() + 5));
        })
      : periodicWorker('pix-recovery', RECOVERY_POLL_MS, ctx.log, () => recoverUnsent(ctx));
  return [recovery];
}
