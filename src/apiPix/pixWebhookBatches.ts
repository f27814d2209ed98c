import type { Database } from '../db/db.js';
import { emitEvent } from '../events/outbox.js';
import * as engine from '../webhooks/repository.js';
import * as store from './pixStore.js';
import { pixView } from './pixViews.js';
import { PIX_WEBHOOK_EVENT } from './pixWebhooks.js';

/**
 * Turns the notices of API Pix webhooks (pixNotices.ts) into deliveries of the engine: per
 * webhook, up to BATCH.pix Pix in one `{"pix": [...]}` body (each Pix once, as it stands now, with
 * its returns), written as one internal outbox event delivered directly to the webhook's engine
 * registration, in the transaction that takes the notices. From there the engine owns it: retries,
 * the per-webhook order (one subject per webhook), signing headers, the private-range checks.
 *
 * Run by the engine's dispatcher before each fan-out (src/webhooks/workers.ts `beforeDispatch`):
 * every notice is written with an outbox event of its own (pix.charge.paid, pix.refund.*), so the
 * wake-up that brings that event brings the notice too.
 */
export const BATCH = {
  /** Pix in one POST at most (the standard lets the receiver's PSP group Pix of a key). */
  pix: 50,
  /** Webhooks served per run (the rest wait for the next tick: bounded work per tick). */
  webhooks: 20,
} as const;

interface Due {
  id: string;
  merchant_id: number;
  account_id: number;
  webhook_id: string;
}

/** One run: returns how many deliveries it wrote. */
export async function batchPixNotices(db: Database): Promise<number> {
  const due = await db.query<Due>(
    `SELECT s.id, s.merchant_id, s.account_id, s.webhook_id FROM api_pix_webhooks s
       JOIN webhooks e ON e.id = s.webhook_id AND e.deleted_at IS NULL
      WHERE EXISTS (SELECT 1 FROM api_pix_webhook_notices n WHERE n.subscription_id = s.id)
      LIMIT $1`,
    [BATCH.webhooks],
  );
  let written = 0;
  for (const s of due) {
    const wrote = await db.transaction(async (tx) => {
      const taken = await tx.query<{ end_to_end_id: string }>(
        `DELETE FROM api_pix_webhook_notices WHERE id IN (
           SELECT id FROM api_pix_webhook_notices WHERE subscription_id = $1 ORDER BY id LIMIT $2 FOR UPDATE SKIP LOCKED)
         RETURNING end_to_end_id`,
        [s.id, BATCH.pix],
      );
      const ids = [...new Set(taken.map((t) => t.end_to_end_id))];
      const rows = await store.findReceivedMany(tx, { merchantId: s.merchant_id, accountId: s.account_id }, ids);
      if (rows.length === 0) return false;
      const returns = await store.returnsOf(tx, rows.map((r) => r.id));
      const eventId = await emitEvent(tx, {
        event: PIX_WEBHOOK_EVENT,
        merchantId: s.merchant_id,
        accountId: s.account_id,
        subject: `api-pix-webhook:${s.id}`,
        payload: { pix: rows.map((r) => pixView(r, returns.get(r.id) ?? [])) },
      });
      await engine.insertDirectDelivery(tx, s.webhook_id, eventId);
      return true;
    });
    if (wrote) written++;
  }
  return written;
}
