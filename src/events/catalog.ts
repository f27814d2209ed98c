/**
 * The event catalog of the spec's Events table, and the API key events pixgate adds (issue 28):
 * each event name, the `status` its body carries, and whether it fires. `pix.return.received` is a subscription alias of `pix.payout.returned`.
 */
export interface CatalogEntry {
  event: string;
  status: string;
  description: string;
  firing: 'active' | 'subscribable' | 'alias' | 'manual';
  aliasOf?: string;
}

export const EVENT_CATALOG: readonly CatalogEntry[] = [
  { event: 'pix.charge.created', status: 'created', description: 'QR code generated or cash-in started', firing: 'active' },
  { event: 'pix.charge.paid', status: 'paid', description: 'PIX received and settled', firing: 'active' },
  { event: 'pix.charge.expired', status: 'expired', description: 'QR code expired unpaid', firing: 'active' },
  { event: 'pix.charge.cancelled', status: 'cancelled', description: 'QR code cancelled before payment', firing: 'subscribable' },
  { event: 'pix.payout.queued', status: 'queued', description: 'Outgoing PIX queued by an operational limit', firing: 'active' },
  { event: 'pix.payout.processing', status: 'processing', description: 'Outgoing PIX awaiting confirmation', firing: 'active' },
  { event: 'pix.payout.held', status: 'processing', description: 'Accepted by the instant-payment system, no outcome yet; do not resend', firing: 'active' },
  { event: 'pix.payout.confirmed', status: 'settled', description: 'Outgoing PIX confirmed (terminal)', firing: 'active' },
  { event: 'pix.payout.failed', status: 'rejected', description: 'Outgoing PIX rejected (terminal)', firing: 'active' },
  { event: 'pix.payout.returned', status: 'returned', description: 'Outgoing PIX returned', firing: 'active' },
  { event: 'pix.payout.return.failed', status: 'rejected', description: 'Return attempt rejected; no value came back', firing: 'active' },
  { event: 'pix.refund.requested', status: 'requested', description: 'Return request received (regulatory infraction); precautionary block created on the balance', firing: 'active' },
  { event: 'pix.refund.completed', status: 'settled', description: 'Defense analysis finished and refund executed or released', firing: 'active' },
  { event: 'pix.refund.failed', status: 'failed', description: 'Refund rejected by the payment system (terminal)', firing: 'active' },
  { event: 'pix.return.received', status: 'returned', description: 'Subscription alias of pix.payout.returned', firing: 'alias', aliasOf: 'pix.payout.returned' },
  { event: 'pix.infraction.created', status: 'OPEN', description: 'Infraction received', firing: 'active' },
  { event: 'pix.infraction.resolved', status: 'CLOSED', description: 'Resolved by final decision or cancelled by counterparty', firing: 'active' },
  { event: 'pix.infraction.defense_submitted', status: 'defense_submitted', description: 'Defense submitted by the merchant', firing: 'active' },
  { event: 'tef.transfer.sent', status: 'settled', description: 'Transfer between accounts settled for the source account', firing: 'active' },
  { event: 'tef.transfer.received', status: 'settled', description: 'Transfer between accounts settled for the destination account', firing: 'active' },
  { event: 'tef.transfer.failed', status: 'failed', description: 'Transfer rejected or not settled', firing: 'active' },
  // API key events (not in the spec's table; docs/webhooks.md "API key events", docs/decisions.md).
  { event: 'api_key.created', status: 'active', description: 'An API key was created (its secret is never sent)', firing: 'active' },
  { event: 'api_key.rotated', status: 'active', description: 'An API key got a new secret; the old one works until previous_secret_expires_at', firing: 'active' },
  { event: 'api_key.rotation_completed', status: 'active', description: 'The grace period of a rotation ended: the old secret is refused', firing: 'active' },
  { event: 'api_key.revoked', status: 'revoked', description: 'An API key was revoked: refused from now on', firing: 'active' },
  { event: 'webhook.test', status: 'test', description: 'Manual test, fired only from the administration or merchant portals', firing: 'manual' },
];

export type EventName = (typeof EVENT_CATALOG)[number]['event'];

/**
 * Events pixgate writes to the outbox that are not in the spec's catalog: recorded with the state
 * change like every event (an audit trail of each movement), but never listed by
 * GET /webhooks/events, never accepted in a subscription and so never delivered.
 *   account.deposit.completed   an operator deposit credited an account (docs/admin-api.md)
 */
export const INTERNAL_EVENTS: readonly { event: string; status: string; description: string; bare?: true }[] = [
  { event: 'account.deposit.completed', status: 'completed', description: 'Operator deposit credited to the account (internal; not subscribable)' },
  // A batch of received Pix for a standard API Pix webhook (src/apiPix/pixWebhookBatches.ts),
  // delivered to that webhook only: its body is the standard's {"pix": [...]} as it is (bare).
  { event: 'api_pix.pix', status: '', description: 'Pix notified to an API Pix webhook (internal; delivered to its webhook only)', bare: true },
];

const BY_NAME = new Map(EVENT_CATALOG.map((e) => [e.event, e]));
const INTERNAL_BY_NAME = new Map(INTERNAL_EVENTS.map((e) => [e.event, e]));

/** The `status` an outbox event carries by default: the catalog's, or an internal event's. */
export function outboxStatus(event: string): string | undefined {
  return BY_NAME.get(event)?.status ?? INTERNAL_BY_NAME.get(event)?.status;
}

/** An internal event whose stored body is its payload as given (no `event`, no `status`). */
export function isBareEvent(event: string): boolean {
  return INTERNAL_BY_NAME.get(event)?.bare === true;
}

export function catalogEntry(event: string): CatalogEntry | undefined {
  return BY_NAME.get(event);
}

/** Events a subscription to `event` receives (an alias receives the event it stands for). */
export function deliveredEventFor(subscribed: string): string {
  return BY_NAME.get(subscribed)?.aliasOf ?? subscribed;
}
