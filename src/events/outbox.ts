import { wakeLocal, type Sql } from '../db/db.js';
import { isBareEvent, outboxStatus } from './catalog.js';

export interface OutboxEvent {
  event: string;
  merchantId: number;
  accountId: number | null;
  /** What the event is about (a transaction_id, a charge id, an infraction id): deliveries for one
   *  subject go out in the order their events were written. */
  subject: string;
  /** The delivery body without `event`, which is added. `status` defaults to the catalog's
   *  "Status in body" of the event. Amounts in base units, dates as ISO 8601 with Z. */
  payload: Record<string, unknown> & { status?: string };
}

/** The stored body of an event: `event`, the payload, and `status` (the catalog's by default). */
export function outboxBody(event: string, payload: OutboxEvent['payload']): Record<string, unknown> {
  if (isBareEvent(event)) return payload;
  const status = outboxStatus(event);
  if (status === undefined) throw new Error(`event ${event} is not in the catalog`);
  return { event, ...payload, status: payload.status ?? status };
}

/**
 * Writes an event to the transactional outbox. Call it with the transaction that makes the state
 * change, so the event exists if and only if the change committed. After the commit it wakes this
 * process's webhook dispatcher (`wakeLocal`).
 */
export async function emitEvent(tx: Sql, e: OutboxEvent): Promise<string> {
  const body = outboxBody(e.event, e.payload);
  const [row] = await tx.query<{ event_id: string }>(
    `INSERT INTO outbox_events (event, merchant_id, account_id, subject, payload)
     VALUES ($1, $2, $3, $4, $5::jsonb) RETURNING event_id`,
    [e.event, e.merchantId, e.accountId, e.subject, JSON.stringify(body)],
  );
  // This process's webhook dispatcher looks once the transaction commits (no statement, no NOTIFY:
  // this is the money path; see docs/decisions.md, "Idle: wake-ups instead of polling").
  wakeLocal(tx, 'outbox');
  return row!.event_id;
}
