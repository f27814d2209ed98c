/** Checks of webhook delivery: every event reached the receiver once, signed, with its outbox body, in order. */
import type { Receipt } from '../receiver.js';
import { REPEATABLE, type OutboxEvent } from './events.js';
import type { Add, AuditInput, Figures, Q } from './types.js';

export interface Delivery {
  id: string;
  outbox_id: string;
  status: string;
  webhook_id: string;
  event: string;
  attempts: number;
}

/** Stable JSON (sorted keys) to compare a received body with the outbox payload. */
function stable(v: unknown): string {
  if (Array.isArray(v)) return `[${v.map(stable).join(',')}]`;
  if (v && typeof v === 'object') return `{${Object.keys(v).sort().map((k) => `${JSON.stringify(k)}:${stable((v as Record<string, unknown>)[k])}`).join(',')}}`;
  return JSON.stringify(v);
}

/**
 * Every event reached the receiver's webhook once; every delivery ended delivered; each receipt is
 * signed and carries its outbox payload; a delivery received again after a 2xx only after a fault.
 * Returns the deliveries read and the receipts by delivery id.
 */
export async function deliveriesReachReceiver(
  q: Q,
  input: Pick<AuditInput, 'receipts' | 'faultTimes' | 'faultWindows' | 'webhookIds' | 'subscribed'>,
  events: OutboxEvent[],
  add: Add,
  figures: Figures,
): Promise<{ deliveries: Delivery[]; receiptsById: Map<string, Receipt[]> }> {
  const deliveries = await q<Delivery>(
    `SELECT id::text, outbox_id::text, status, webhook_id::text, event, attempts FROM webhook_deliveries`,
  );
  figures.webhook_deliveries = deliveries.length;
  const deliveryById = new Map(deliveries.map((d) => [d.id, d]));
  const deliveriesByOutbox = new Map<string, number>();
  for (const d of deliveries) if (input.webhookIds.includes(d.webhook_id)) deliveriesByOutbox.set(d.outbox_id, (deliveriesByOutbox.get(d.outbox_id) ?? 0) + 1);
  const delivered = (event: string) => !input.subscribed || input.subscribed.includes(event);
  for (const e of events) {
    if (!delivered(e.event)) continue;
    const n = deliveriesByOutbox.get(e.id) ?? 0;
    if (n !== 1) add('event_not_fanned_out', `outbox ${e.id} ${e.event} ${e.subject}: ${n} deliveries to the receiver's webhook`);
  }
  for (const d of deliveries) if (d.status !== 'delivered') add('delivery_not_delivered', `delivery ${d.id} (${d.event}) is ${d.status} after ${d.attempts} attempts`);
  const payloadByOutbox = new Map(events.map((e) => [e.id, e.payload]));
  const receiptsById = new Map<string, Receipt[]>();
  for (const r of input.receipts) receiptsById.set(r.deliveryId, [...(receiptsById.get(r.deliveryId) ?? []), r]);
  figures.receipts = input.receipts.length;
  figures.receipts_answered_503 = input.receipts.filter((r) => r.answered !== 200).length;
  let expectedRedeliveries = 0;
  let unexpected = 0;
  for (const r of input.receipts) if (!r.signatureOk) add('bad_signature', `delivery ${r.deliveryId} attempt ${r.attempt}: X-Service-Signature does not verify`);
  for (const [id, list] of receiptsById) {
    const d = deliveryById.get(id);
    if (!d) {
      add('unknown_delivery', `receiver got delivery id ${id} (${list[0]!.event}) that is not in webhook_deliveries`);
      continue;
    }
    const payload = payloadByOutbox.get(d.outbox_id);
    for (const r of list) {
      let parsed: unknown;
      try {
        parsed = JSON.parse(r.body);
      } catch {
        parsed = r.body;
      }
      if (stable(parsed) !== stable(payload)) add('body_mismatch', `delivery ${id} attempt ${r.attempt}: body differs from outbox ${d.outbox_id}`);
    }
    // A delivery received again after the receiver answered 2xx is expected only when a fault
    // (SIGKILL of the server, PostgreSQL stopped) may have lost the sender's record of that answer.
    const firstOk = list.find((r) => r.answered === 200);
    if (!firstOk) continue;
    for (const later of list.filter((r) => r.at > firstOk.at)) {
      const excused = redeliveryExcused(firstOk.at, later.at, input.faultTimes, input.faultWindows ?? []);
      if (excused) expectedRedeliveries++;
      else {
        unexpected++;
        add('unexpected_duplicate', `delivery ${id} (${firstOk.event}) received again (attempt ${later.attempt}) ${later.at - firstOk.at} ms after a 2xx answer, with no fault in between`);
      }
    }
  }
  figures.redeliveries_after_fault = expectedRedeliveries;
  figures.unexpected_duplicates = unexpected;
  return { deliveries, receiptsById };
}

/** Every delivery of every event was answered 2xx by the receiver at least once. */
export function everyEventAnswered(events: OutboxEvent[], deliveries: Delivery[], receiptsById: Map<string, Receipt[]>, add: Add): void {
  const deliveriesOf = new Map<string, typeof deliveries>();
  for (const d of deliveries) deliveriesOf.set(d.outbox_id, [...(deliveriesOf.get(d.outbox_id) ?? []), d]);
  for (const e of events) {
    const ds = deliveriesOf.get(e.id) ?? [];
    for (const d of ds) if (!(receiptsById.get(d.id) ?? []).some((r) => r.answered === 200)) add('event_not_received', `outbox ${e.id} ${e.event} ${e.subject} (delivery ${d.id}, ${d.status}) never answered 2xx by the receiver`);
  }
}

/** The same state change announced under two delivery ids (two events): by (event, subject, status). */
export function sameChangeTwice(deliveries: Delivery[], receiptsById: Map<string, Receipt[]>, add: Add): void {
  const deliveryById = new Map(deliveries.map((d) => [d.id, d]));
  const seen = new Map<string, string>();
  for (const [id, list] of receiptsById) {
    const body = (() => {
      try {
        return JSON.parse(list[0]!.body);
      } catch {
        return {};
      }
    })();
    const d = deliveryById.get(id);
    if (!d || REPEATABLE.has(list[0]!.event)) continue;
    const k = `${d.webhook_id}|${list[0]!.event}|${body.transaction_id ?? ''}|${body.infraction_id ?? ''}|${body.status}`;
    if (seen.has(k) && list[0]!.event.startsWith('pix.payout')) add('unexpected_duplicate', `two deliveries (${seen.get(k)}, ${id}) announce ${k}`);
    seen.set(k, id);
  }
}

/**
 * Order of each subject's events (docs/webhooks.md, "Order per subject"; life cycles in docs/pix.md
 * and docs/med.md): as written (outbox id order) they never go backwards in their life cycle
 * (EVENT_RANK: a payout queued → processing (→ held) → confirmed or failed → returned; a charge
 * created → paid; an infraction created → refund requested → resolved; events of equal rank may
 * come in either order), and the receiver sees a delivery of a subject
 * only after every earlier delivery of that subject to the same webhook was answered 2xx (or ended
 * failed). Repeats of a delivery already answered (at least once) are not order violations.
 */
export const EVENT_RANK: Record<string, number> = {
  'pix.charge.created': 0,
  'pix.charge.paid': 1,
  'pix.payout.queued': 0,
  'pix.payout.processing': 1,
  'pix.payout.held': 1,
  'pix.payout.confirmed': 2,
  'pix.payout.failed': 2,
  'pix.payout.returned': 3,
  'pix.payout.return.failed': 3,
  'pix.infraction.created': 0,
  'pix.refund.requested': 1,
  'pix.infraction.resolved': 2,
};

export function deliveryOrder(
  events: { id: string; event: string; subject: string }[],
  deliveries: { id: string; outbox_id: string; status: string; webhook_id: string }[],
  receipts: Receipt[],
  add: Add,
  figures: Record<string, number>,
): void {
  const eventById = new Map(events.map((e) => [e.id, e]));
  const lastRank = new Map<string, { rank: number; event: string }>();
  for (const e of [...events].sort((a, b) => Number(a.id) - Number(b.id))) {
    const rank = EVENT_RANK[e.event];
    if (rank === undefined) continue;
    const before = lastRank.get(e.subject);
    if (before && rank < before.rank) add('event_order', `${e.subject}: ${e.event} (outbox ${e.id}) written after ${before.event}`);
    if (!before || rank > before.rank) lastRank.set(e.subject, { rank, event: e.event });
  }
  // Arrival order at the receiver (index in its log), per delivery: first arrival, first 2xx.
  const first = new Map<string, number>();
  const firstOk = new Map<string, number>();
  receipts.forEach((r, i) => {
    if (!first.has(r.deliveryId)) first.set(r.deliveryId, i);
    if (r.answered >= 200 && r.answered < 300 && !firstOk.has(r.deliveryId)) firstOk.set(r.deliveryId, i);
  });
  const chains = new Map<string, { id: string; outbox: number; status: string; event: string }[]>();
  for (const d of deliveries) {
    const e = eventById.get(d.outbox_id);
    if (!e) continue;
    const k = `${d.webhook_id}|${e.subject}`;
    chains.set(k, [...(chains.get(k) ?? []), { id: d.id, outbox: Number(d.outbox_id), status: d.status, event: e.event }]);
  }
  let checked = 0;
  for (const [k, chain] of chains) {
    if (chain.length < 2) continue;
    chain.sort((a, b) => a.outbox - b.outbox);
    for (let i = 1; i < chain.length; i++) {
      const later = chain[i]!;
      const at = first.get(later.id);
      if (at === undefined) continue;
      checked++;
      for (const earlier of chain.slice(0, i)) {
        if (earlier.status === 'failed') continue;
        const ok = firstOk.get(earlier.id);
        if (ok === undefined || ok > at) {
          add('delivery_order', `${k.split('|')[1]}: ${later.event} (delivery ${later.id}) arrived before ${earlier.event} (delivery ${earlier.id}) was ${ok === undefined ? 'ever answered 2xx' : 'answered 2xx'}`);
          break;
        }
      }
    }
  }
  figures.delivery_order_checked = checked;
}

/**
 * Whether a delivery received again at `laterAt` after a 2xx answer at `firstAt` is explained by a
 * fault: one happened between (from 2 s before the answer: the sender's record of it may have been
 * in flight), or the database was failing over at some moment between — the sender could then
 * record the answer only after its lease had ended and another sender had taken the delivery.
 */
export function redeliveryExcused(firstAt: number, laterAt: number, faultTimes: readonly number[], faultWindows: ReadonlyArray<readonly [number, number]>): boolean {
  return faultTimes.some((t) => t >= firstAt - 2000 && t <= laterAt) || faultWindows.some(([start, end]) => end >= firstAt - 2000 && start <= laterAt);
}
