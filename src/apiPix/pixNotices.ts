import type { Sql } from '../db/db.js';

/**
 * The one call the PIX money paths make for API Pix webhooks (src/pix/inbound.ts when a payment
 * pays a charge, src/pix/refund.ts when a return of such a payment becomes final): in the state
 * change's own transaction, a notice for the Pix when its key has a standard webhook. Nothing is
 * written when it has none (or its engine registration was deleted through DELETE /webhooks/{id}). The dispatcher turns notices into deliveries (pixWebhookBatches.ts).
 */
export async function noticeForKey(tx: Sql, n: { accountId: number; chave: string; endToEndId: string }): Promise<void> {
  await tx.query(
    `INSERT INTO api_pix_webhook_notices (subscription_id, end_to_end_id)
     SELECT w.id, $3 FROM api_pix_webhooks w JOIN webhooks e ON e.id = w.webhook_id AND e.deleted_at IS NULL
      WHERE w.account_id = $1 AND w.chave = $2`,
    [n.accountId, n.chave, n.endToEndId],
  );
}

/** The same for a Pix known by its record: a notice when it paid a charge whose key has a webhook. */
export async function noticeForPix(tx: Sql, originalId: string): Promise<void> {
  await tx.query(
    `INSERT INTO api_pix_webhook_notices (subscription_id, end_to_end_id)
     SELECT w.id, t.end_to_end_id
       FROM transactions t
       JOIN pix_charges c ON c.transaction_uuid = t.id
       JOIN api_pix_webhooks w ON w.account_id = c.account_id AND w.chave = c.pix_key
       JOIN webhooks e ON e.id = w.webhook_id AND e.deleted_at IS NULL
      WHERE t.id = $1 AND t.end_to_end_id IS NOT NULL`,
    [originalId],
  );
}
