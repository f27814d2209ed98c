import type { Database, Sql } from '../db/db.js';
import { emitEvent } from '../events/outbox.js';
import { DomainError, invalidFields } from '../errors/catalog.js';
import type { Clock } from '../lib/clock.js';
import { newUuid } from '../lib/ids.js';
import { parseAllowedHosts } from './destination.js';
import * as repo from './repository.js';
import { createView, MAX_WEBHOOKS_PER_MERCHANT, validateWebhook } from './registration.js';

/**
 * What the merchant API, the merchant portal and the operator API do with webhooks, in one place:
 * register, delete, re-send a delivery, fire `webhook.test`.
 */

/** What these functions use (AppContext has it). */
export interface WebhookDeps {
  db: Database;
  clock: Clock;
  config: { webhookAllowedHosts: readonly string[] };
}

export interface WebhookOwner {
  merchantId: number;
  /** The key's account; null for a merchant-wide key (the webhook is then global). */
  accountId: number | null;
  /** The key that registered it; null when a team member did (the portal). */
  clientId: string | null;
}

/** Validates and registers a webhook (per-merchant limit under the merchant's lock). */
export async function createWebhook(ctx: WebhookDeps, owner: WebhookOwner, body: unknown, record: (tx: Sql, payload: ReturnType<typeof createView>) => Promise<void> = async () => {}) {
  const input = validateWebhook(body, parseAllowedHosts(ctx.config.webhookAllowedHosts));
  return ctx.db.transaction(async (tx) => {
    await repo.lockMerchantWebhooks(tx, owner.merchantId);
    if ((await repo.countLiveWebhooks(tx, owner.merchantId)) >= MAX_WEBHOOKS_PER_MERCHANT) {
      throw new DomainError('unprocessable_entity', { message: `webhook limit reached: at most ${MAX_WEBHOOKS_PER_MERCHANT} webhooks per merchant` });
    }
    const row = await repo.insertWebhook(tx, {
      id: newUuid(),
      merchantId: owner.merchantId,
      accountId: owner.accountId,
      clientId: owner.clientId,
      url: input.url,
      events: input.events,
      secret: input.secret,
      description: input.description,
      allowInsecure: input.allowInsecure,
    });
    const answer = createView(row);
    await record(tx, answer);
    return answer;
  });
}

/** Soft-deletes a webhook of the scope; false when there is none (or it was deleted already). */
export async function deleteWebhook(ctx: Pick<WebhookDeps, 'db'>, scope: repo.WebhookScope, id: string): Promise<boolean> {
  return ctx.db.transaction((tx) => repo.deleteWebhook(tx, scope, id.toLowerCase()));
}

/** Puts a finished delivery back in its queue (same delivery id); 409 when it is pending or the webhook deleted. */
export async function resendDelivery(ctx: Pick<WebhookDeps, 'db'>, webhook: repo.WebhookRow, deliveryId: string): Promise<void> {
  if (webhook.deleted_at) throw new DomainError('conflict', { message: 'webhook is deleted' });
  const before = await repo.findDelivery(ctx.db, webhook.id, deliveryId);
  if (!before) throw new DomainError('not_found', { message: 'delivery not found' });
  if (before.status === 'pending') throw new DomainError('conflict', { message: 'delivery is already pending' });
  if (!(await repo.requeueDelivery(ctx.db, webhook.id, deliveryId))) throw new DomainError('conflict', { message: 'delivery is already pending' });
}

/** The most deliveries one "redeliver every failed delivery since …" puts back in the queue. */
export const REDELIVER_MAX = 500;
/** How far back "since" may reach. */
export const REDELIVER_WINDOW_DAYS = 30;

/**
 * Redelivers every delivery of `webhook` that failed for good since `since` — at most
 * REDELIVER_MAX at a time (the answer says how many remain), `since` no more than
 * REDELIVER_WINDOW_DAYS back and not in the future — through the delivery engine: each goes back
 * in its queue as a resend does (same delivery id, a fresh retry schedule). Idempotent: only
 * deliveries still `failed` are taken, so a repeat finds nothing the first one took.
 */
export async function redeliverFailedSince(
  ctx: Pick<WebhookDeps, 'db' | 'clock'>,
  webhook: repo.WebhookRow,
  since: Date,
): Promise<{ requeued: number; remaining: number }> {
  if (webhook.deleted_at) throw new DomainError('conflict', { message: 'webhook is deleted' });
  const now = ctx.clock.now().getTime();
  if (Number.isNaN(since.getTime()) || since.getTime() > now || since.getTime() < now - REDELIVER_WINDOW_DAYS * 86_400_000) {
    throw invalidFields({ since: [`must be within the last ${REDELIVER_WINDOW_DAYS} days`] });
  }
  return ctx.db.transaction((tx) => repo.requeueFailedSince(tx, webhook.id, since, REDELIVER_MAX));
}

/** Fires `webhook.test` at one webhook (whether it subscribes or not); returns the delivery id. */
export async function sendTestEvent(ctx: Pick<WebhookDeps, 'db' | 'clock'>, webhook: repo.WebhookRow, from: 'administration' | 'merchant portal'): Promise<string> {
  if (webhook.deleted_at) throw new DomainError('conflict', { message: 'webhook is deleted' });
  if (!webhook.is_active) throw new DomainError('conflict', { message: 'webhook is inactive (is_active: false): nothing is fired' });
  return ctx.db.transaction(async (tx) => {
    const eventId = await emitEvent(tx, {
      event: 'webhook.test',
      merchantId: webhook.merchant_id,
      accountId: webhook.account_id,
      subject: `webhook:${webhook.id}`,
      payload: { status: 'test', webhook_id: webhook.id, description: `Test delivery fired from the ${from}`, created_at: ctx.clock.now().toISOString() },
    });
    return repo.insertDirectDelivery(tx, webhook.id, eventId);
  });
}
