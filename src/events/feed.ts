import type { Sql } from '../db/db.js';
import { EVENT_CATALOG } from './catalog.js';
import { simulatedAt } from '../lib/sandboxClock.js';

/**
 * An event is shown once every transaction older than the one that wrote it has finished, or at
 * the latest this many seconds after its transaction started: on a shared PostgreSQL cluster any
 * long transaction (of any database) holds the snapshot horizon back, and the feed must not stall
 * behind it. Event-writing transactions of pixgate last milliseconds.
 */
export const FEED_HORIZON_MAX_WAIT_SECONDS = 5;
const FINAL = `(xact_id IS NULL OR xact_id < pg_snapshot_xmin(pg_current_snapshot()) OR created_at < now() - interval '${FEED_HORIZON_MAX_WAIT_SECONDS} seconds')`;

/**
 * The events the feed, the stream and `pixgate listen` show: those of the public catalog as they
 * are stored (an alias is stored as the event it stands for). Internal events the outbox also
 * records (`account.deposit.completed`, catalog.ts INTERNAL_EVENTS) are never shown.
 */
export const FEED_EVENTS: readonly string[] = EVENT_CATALOG.filter((e) => e.firing !== 'alias').map((e) => e.event);
const FEED_EVENT_SET = new Set(FEED_EVENTS);
const isFeedEvent = (event: string) => FEED_EVENT_SET.has(event);

/** One event as the feed shows it. */
export interface FeedEvent {
  /** The cursor: strictly increasing in the order events are final. */
  sequence: number;
  /** The event's UUID (the same in every delivery of it). */
  id: string;
  event: string;
  account_id: number | null;
  subject: string;
  created_at: string;
  /** The delivery body as an object. */
  payload: Record<string, unknown>;
  /** The exact bytes a webhook delivery of this event carries (sign these to forward it). */
  body: string;
}

export interface FeedQuery {
  merchantId: number;
  /** An account key sees its account's events; a merchant-wide key (null) every event of the merchant. */
  accountId: number | null;
  after: number;
  /** Event names; empty = every event of the public catalog (FEED_EVENTS). */
  types: readonly string[];
  limit: number;
}

interface Row {
  id: number;
  event_id: string;
  event: string;
  account_id: number | null;
  subject: string;
  created_at: Date;
  payload: Record<string, unknown>;
}

/**
 * The merchant's events after a cursor, oldest first. Only rows whose writing transaction is older
 * than every transaction still running are returned (see migration 0540), so a row below a cursor
 * the reader holds can never appear later.
 */
export async function readFeed(db: Sql, q: FeedQuery): Promise<FeedEvent[]> {
  const rows = await db.query<Row>(
    // created_at in simulated time (the sandbox clock's offset when it was written; docs/sandbox-clock.md).
    `SELECT id, event_id, event, account_id, subject, ${simulatedAt('created_at')} AS created_at, payload
       FROM outbox_events
      WHERE merchant_id = $1
        AND id > $2
        AND ($3::bigint IS NULL OR account_id = $3)
        AND event = ANY($4::text[])
        AND ${FINAL}
      ORDER BY id
      LIMIT $5`,
    [q.merchantId, q.after, q.accountId, q.types.length > 0 ? q.types.filter(isFeedEvent) : FEED_EVENTS, q.limit],
  );
  return rows.map((r) => ({
    sequence: Number(r.id),
    id: r.event_id,
    event: r.event,
    account_id: r.account_id === null ? null : Number(r.account_id),
    subject: r.subject,
    created_at: r.created_at.toISOString(),
    payload: r.payload,
    // Deliveries send JSON.stringify of the stored payload (webhooks/workers.ts): the same bytes.
    body: JSON.stringify(r.payload),
  }));
}

/** The newest sequence the merchant can see now (where a live stream without a cursor starts). */
export async function latestSequence(db: Sql, merchantId: number, accountId: number | null): Promise<number> {
  const [row] = await db.query<{ id: number | null }>(
    `SELECT max(id) AS id FROM outbox_events
      WHERE merchant_id = $1 AND ($2::bigint IS NULL OR account_id = $2)
        AND ${FINAL}`,
    [merchantId, accountId],
  );
  return row?.id == null ? 0 : Number(row.id);
}
