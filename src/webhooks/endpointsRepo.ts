import { notify, type Sql } from '../db/db.js';
import { WAKE } from './queueSql.js';
import { promoteStrandedHeads } from './deliveriesRepo.js';

/** SQL of webhook registrations (endpoints): create, list, delete, pause and resume. */

export interface WebhookRow {
  id: string;
  merchant_id: number;
  account_id: number | null;
  client_id: string | null;
  url: string;
  events: string[];
  secret: string;
  description: string | null;
  is_active: boolean;
  allow_insecure: boolean;
  created_at: Date;
  updated_at: Date;
  deleted_at: Date | null;
}

/**
 * What an API key may see and delete: a merchant-wide key (accountId null) every webhook of its
 * merchant; an account key only the webhooks of its account.
 */
export interface WebhookScope {
  merchantId: number;
  accountId: number | null;
}

export interface NewWebhook {
  id: string;
  merchantId: number;
  accountId: number | null;
  /** The API key that registered it (null when written by other means). */
  clientId: string | null;
  url: string;
  events: string[];
  secret: string;
  description: string | null;
  allowInsecure: boolean;
}

/** Serializes registrations of one merchant (the per-merchant limit is checked under it). */
export async function lockMerchantWebhooks(tx: Sql, merchantId: number): Promise<void> {
  await tx.query(`SELECT pg_advisory_xact_lock(hashtext('webhooks'), $1::int)`, [merchantId % 2_147_483_647]);
}

export async function countLiveWebhooks(sql: Sql, merchantId: number): Promise<number> {
  const [row] = await sql.query<{ n: number }>(
    'SELECT count(*)::int AS n FROM webhooks WHERE merchant_id = $1 AND deleted_at IS NULL',
    [merchantId],
  );
  return row!.n;
}

export async function insertWebhook(tx: Sql, w: NewWebhook): Promise<WebhookRow> {
  const [row] = await tx.query<WebhookRow>(
    `INSERT INTO webhooks (id, merchant_id, account_id, client_id, url, events, secret, description, allow_insecure)
     VALUES ($1, $2, $3, $4, $5, $6::text[], $7, $8, $9) RETURNING *`,
    [w.id, w.merchantId, w.accountId, w.clientId, w.url, w.events, w.secret, w.description, w.allowInsecure],
  );
  return row!;
}

export async function listWebhooks(sql: Sql, scope: WebhookScope): Promise<WebhookRow[]> {
  return sql.query<WebhookRow>(
    `SELECT * FROM webhooks
      WHERE merchant_id = $1 AND deleted_at IS NULL AND ($2::bigint IS NULL OR account_id = $2)
      ORDER BY created_at, id`,
    [scope.merchantId, scope.accountId],
  );
}

/** Soft-deletes a webhook within the scope and cancels its pending deliveries; false when none matched. */
export async function deleteWebhook(tx: Sql, scope: WebhookScope, id: string): Promise<boolean> {
  const rows = await tx.query(
    `UPDATE webhooks SET deleted_at = now(), updated_at = now()
      WHERE id = $1 AND merchant_id = $2 AND deleted_at IS NULL AND ($3::bigint IS NULL OR account_id = $3)
      RETURNING id`,
    [id, scope.merchantId, scope.accountId],
  );
  if (rows.length === 0) return false;
  await tx.query(
    `UPDATE webhook_deliveries SET status = 'cancelled', claim_token = NULL, updated_at = now()
      WHERE webhook_id = $1 AND status = 'pending'`,
    [id],
  );
  return true;
}

/**
 * Points a live webhook at another URL (a standard API Pix webhook set again for its key): its
 * pending deliveries go to the new URL, in their order.
 */
export async function setWebhookUrl(tx: Sql, id: string, url: string, allowInsecure: boolean): Promise<void> {
  await tx.query('UPDATE webhooks SET url = $2, allow_insecure = $3, updated_at = now() WHERE id = $1 AND deleted_at IS NULL', [id, url, allowInsecure]);
}

/** Any webhook, deleted ones included (operator view). */
export async function findWebhook(sql: Sql, id: string): Promise<WebhookRow | undefined> {
  const [row] = await sql.query<WebhookRow>('SELECT * FROM webhooks WHERE id = $1', [id]);
  return row;
}

/**
 * Pauses or resumes a webhook. Its pending deliveries stay; while it is paused they are taken off the
 * senders' due index (ready = false; one in flight finishes), and on resume the heads of its subject
 * queues become ready again.
 */
export async function setWebhookActive(tx: Sql, id: string, active: boolean): Promise<WebhookRow | undefined> {
  const [row] = await tx.query<WebhookRow>(
    'UPDATE webhooks SET is_active = $2, updated_at = now() WHERE id = $1 AND deleted_at IS NULL RETURNING *',
    [id, active],
  );
  if (!row) return undefined;
  if (active) {
    await promoteStrandedHeads(tx, id);
    await notify(tx, WAKE.delivery); // its ready deliveries are due again (the senders left them out)
  } else {
    await tx.query(
      `UPDATE webhook_deliveries SET ready = false, updated_at = now()
        WHERE webhook_id = $1 AND status = 'pending' AND ready AND claim_token IS NULL`,
      [id],
    );
  }
  return row;
}

export interface AdminWebhookFilter {
  id?: string | undefined;
  merchantId?: number | undefined;
  accountId?: number | undefined;
  includeDeleted: boolean;
}

export interface WebhookWithCounts extends WebhookRow {
  pending: number;
  delivered: number;
  failed: number;
  cancelled: number;
}

export async function listWebhooksForOperator(sql: Sql, filter: AdminWebhookFilter, limit: number): Promise<WebhookWithCounts[]> {
  return sql.query<WebhookWithCounts>(
    `SELECT w.*,
            (SELECT count(*)::int FROM webhook_deliveries d WHERE d.webhook_id = w.id AND d.status = 'pending') AS pending,
            (SELECT count(*)::int FROM webhook_deliveries d WHERE d.webhook_id = w.id AND d.status = 'delivered') AS delivered,
            (SELECT count(*)::int FROM webhook_deliveries d WHERE d.webhook_id = w.id AND d.status = 'failed') AS failed,
            (SELECT count(*)::int FROM webhook_deliveries d WHERE d.webhook_id = w.id AND d.status = 'cancelled') AS cancelled
       FROM webhooks w
      WHERE ($1::bigint IS NULL OR w.merchant_id = $1) AND ($2::bigint IS NULL OR w.account_id = $2)
        AND ($3::boolean OR w.deleted_at IS NULL) AND ($5::uuid IS NULL OR w.id = $5)
      ORDER BY w.created_at DESC, w.id
      LIMIT $4`,
    [filter.merchantId ?? null, filter.accountId ?? null, filter.includeDeleted, limit, filter.id ?? null],
  );
}
