/**
 * The event catalog of the spec's Events table: each event name, the `status` its body carries,
 * and whether it fires. `pix.return.received` is a subscription alias of `pix.payout.returned`.
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
  { event: 'webhook.test', status: 'test', description: 'Manual test, fired only from the administration or merchant portals', firing: 'manual' },
];

export type EventName = (typeof EVENT_CATALOG)[number]['event'];

const BY_NAME = new Map(EVENT_CATALOG.map((e) => [e.event, e]));

export function catalogEntry(event: string): CatalogEntry | undefined {
  return BY_NAME.get(event);
}

/** Events a subscription to `event` receives (an alias receives the event it stands for). */
export function deliveredEventFor(subscribed: string): string {
  return BY_NAME.get(subscribed)?.aliasOf ?? subscribed;
}
