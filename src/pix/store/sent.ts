import { wakeLocal, type Sql } from '../../db/db.js';
import type { OwnedTransaction } from '../../transactions/records.js';

/** Step 3 of one cash-out the rail took (see `markSentWithEvents`). */
export interface SentMark {
  row: OwnedTransaction;
  paymentStatus: 'processing' | 'queued';
  now: Date;
  event: { event: string; body: Record<string, unknown> };
  /** The Idempotency-Key's answer, recorded only while its claim is still held. */
  answer: { id: number; token: string; statusCode: number; body: string } | null;
}

/**
 * Step 3 of cash-outs the rail took, in one statement for many (atomic on its own, no
 * BEGIN/COMMIT): each record moves from stage 1 to stage 2 (`processing` or `queued`) unless
 * something moved it first or its answer's claim is no longer held, its event is written to the
 * outbox, and its Idempotency-Key's answer recorded — each only if that record moved. Returns, per
 * mark in order, whether the record moved (undefined: nothing moved) and whether the answer was
 * recorded; the caller knows the record after the move (its own, at stage 2), so no row is read
 * back. A record marked twice in one call moves once (for the first mark).
 */
export async function markSentWithEvents(sql: Sql, marks: readonly SentMark[]): Promise<({ recorded: boolean } | undefined)[]> {
  const json = JSON.stringify(
    marks.map((m, n) => ({
      n,
      id: m.row.id,
      payment_status: m.paymentStatus,
      updated_at: m.now,
      event: m.event.event,
      merchant_id: m.row.merchant_id,
      payload: m.event.body,
      claim_id: m.answer?.id ?? null,
      claim_token: m.answer?.token ?? null,
      response_status: m.answer?.statusCode ?? null,
      response_body: m.answer?.body ?? null,
    })),
  );
  const moved = await sql.query<{ n: number; recorded: boolean }>(
    `WITH items AS MATERIALIZED (
       SELECT DISTINCT ON (id) * FROM jsonb_to_recordset($1::jsonb) AS x(
         n int, id uuid, payment_status text, updated_at timestamptz, event text, merchant_id bigint, payload jsonb,
         claim_id bigint, claim_token uuid, response_status int, response_body text)
        ORDER BY id, n),
     t AS (
       UPDATE transactions tr SET stage = 2, payment_status = i.payment_status, updated_at = i.updated_at
         FROM items i
        -- The records are found by their primary key, one probe each (id = ANY of the batch's
        -- ids): joined on tr.id = i.id alone, the planner estimated "stage < 2" at a row or two
        -- and scanned the whole table for every batch. stage < 2 is stage = 1 (stages are 1 to 3).
        -- The update changes no indexed column, so it is heap-only when the page has room
        -- (migration 0680).
        WHERE tr.id = ANY (ARRAY(SELECT id FROM items)) AND tr.id = i.id AND tr.stage < 2
          -- The claim still held: a scalar subquery, one probe of the primary key per record (an
          -- EXISTS could be run as a hashed subplan, a scan of every key of the day per batch).
          AND (i.claim_id IS NULL OR (
                SELECT k.status FROM idempotency_keys k WHERE k.id = i.claim_id AND k.owner_token = i.claim_token) = 'in_progress')
       RETURNING tr.account_id, tr.transaction_id, i.n),
     ev AS (
       INSERT INTO outbox_events (event, merchant_id, account_id, subject, payload)
       SELECT i.event, i.merchant_id, t.account_id, t.transaction_id, i.payload FROM t JOIN items i ON i.n = t.n ORDER BY t.n RETURNING 1),
     k AS (
       UPDATE idempotency_keys k SET status = 'completed', response_status = i.response_status
         FROM t JOIN items i ON i.n = t.n
        WHERE k.id = i.claim_id AND k.owner_token = i.claim_token AND k.status = 'in_progress'
       RETURNING k.id, k.expires_at, i.response_body),
     -- The answer's bytes, in the day-partitioned table beside the key (migration 0910).
     kr AS (
       INSERT INTO idempotency_responses (key_id, expires_at, body) SELECT id, expires_at, response_body FROM k ORDER BY id
       ON CONFLICT (key_id, expires_at) DO UPDATE SET body = EXCLUDED.body RETURNING 1)
     SELECT t.n, EXISTS (SELECT 1 FROM k JOIN items i ON i.claim_id = k.id WHERE i.n = t.n) AS recorded FROM t`,
    [json],
  );
  if (moved.length > 0) wakeLocal(sql, 'outbox'); // as emitEvent does: the webhook dispatcher looks once this committed
  // (A data-modifying CTE runs to completion whether or not the query reads it: `ev` is written.)
  const byMark = new Map(moved.map(({ n, recorded }) => [n, { recorded }]));
  return marks.map((_, n) => byMark.get(n));
}
