import type { AppContext } from '../context.js';
import type { BackgroundWorker } from '../lib/worker.js';
import { systemClock } from '../lib/clock.js';
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
 * (Old rail-inbox ids and limit windows are purged by the retention worker, src/retention/.)
 */
export const UNSENT_AFTER_MS = 15_000;

export async function recoverUnsent(ctx: AppContext, options: { olderThanMs?: number; limit?: number } = {}): Promise<number> {
  const now = ctx.clock.now();
  const rows = await repo.claimUnsent(ctx.db, new Date(now.getTime() - (options.olderThanMs ?? UNSENT_AFTER_MS)), now, options.limit ?? 100);
  for (const row of rows) {
    try {
      if (row.kind === 'cash_out') {
        const ack = await ctx.rail.sendPayment(paymentOrder(row, ctx.config.institutionIspb));
        await ctx.db.transaction((tx) => applyPaymentAck(tx, ctx, row, ack, { emitTimeoutFailure: true }));
      } else if (row.kind === 'refund' || row.kind === MED.refundKind) {
        const original = (await repo.findById(ctx.db, row.original_id!))!;
        const ack = await ctx.rail.sendReturn(returnOrder(row, original));
        await ctx.db.transaction((tx) => applyReturnAck(tx, ctx, row, ack, row.kind === MED.refundKind ? settleMedRefund : undefined));
      }
      ctx.log.info({ transaction_id: row.transaction_id }, 'unacknowledged order sent to the rail again');
    } catch (err) {
      ctx.log.error({ err, transaction_id: row.transaction_id }, 'could not send an unacknowledged order again; will retry');
    }
  }
  return rows.length;
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

export function pixWorkers(ctx: AppContext): BackgroundWorker[] {
  const recovery =
    ctx.clock === systemClock
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
