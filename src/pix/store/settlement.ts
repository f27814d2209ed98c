import { wakeLocal, type Sql } from '../../db/db.js';
import { dayStart } from '../../db/partitions.js';
import { OWNED, type OwnedTransaction } from '../../transactions/records.js';

/**
 * A record by end-to-end id and, when it is a cash-out, its account's books locked (FOR UPDATE,
 * in id order) in the same statement — the lock order of every money movement: books first, then
 * the record (`lockTransaction`, which reads it as of its own lock).
 */
export async function findByEndToEndIdLockingCashOutAccount(tx: Sql, endToEndId: string): Promise<OwnedTransaction | undefined> {
  const [row] = await tx.query<OwnedTransaction & { locked_books: number }>(
    `SELECT t.*, a.merchant_id,
            (SELECT count(*) FROM (SELECT 1 FROM ledger_accounts la
                                     WHERE la.account_id = t.account_id AND t.kind = 'cash_out' ORDER BY la.id FOR UPDATE) l)::int AS locked_books
       FROM transactions t JOIN accounts a ON a.id = t.account_id WHERE t.end_to_end_id = $1`,
    [endToEndId],
  );
  if (!row) return undefined;
  const { locked_books: _locked, ...rest } = row;
  return rest;
}

// ---- settlements of a delivery batch in one statement (issue 12) ----

/**
 * The cash-outs with these end-to-end ids, as of a read without locks: what their settlement's
 * events say (`payoutBody` reads only what a cash-out never changes). `settleCashOuts` locks
 * them and takes their stage as of its lock.
 */
export async function readCashOutsForSettlement(sql: Sql, endToEndIds: readonly string[]): Promise<OwnedTransaction[]> {
  return sql.query<OwnedTransaction>(
    `${OWNED} WHERE t.end_to_end_id = ANY($1::text[]) AND t.kind = 'cash_out'`,
    [endToEndIds],
  );
}

/** A cash-out to settle in `settleCashOuts`, read by `readCashOutsForSettlement`. */
export interface CashOutSettlement {
  /** The rail notification that settles it: applied only if its id is new in rail_inbox. */
  notificationId: string;
  row: OwnedTransaction;
  settledAt: Date;
  /** The outbox body of `pix.payout.processing`, written first if the record is still at stage 1. */
  processing: Record<string, unknown>;
  /** The outbox body of `pix.payout.confirmed`. */
  confirmed: Record<string, unknown>;
}

const SETTLE_CASH_OUTS = `WITH ins AS (
       INSERT INTO rail_inbox (notification_id, kind, notified_day)
       SELECT id, 'payment.settled', day FROM unnest($1::text[], $4::timestamptz[]) AS x(id, day)
       ON CONFLICT (notification_id, notified_day) DO NOTHING RETURNING notification_id),
     items AS MATERIALIZED (
       SELECT i.* FROM jsonb_to_recordset($2::jsonb) AS i(n int, notification_id text, id uuid, transaction_id text, account_id bigint,
         merchant_id bigint, amount bigint, fee_amount bigint, settled_at timestamptz, processing jsonb, confirmed jsonb)
        WHERE i.notification_id IN (SELECT notification_id FROM ins)),
     -- The records locked in id order, one probe of the primary key each, each as of its lock.
     locked AS MATERIALIZED (
       SELECT l.id, l.stage FROM (SELECT id FROM items ORDER BY id) i
        CROSS JOIN LATERAL (SELECT r.id, r.stage FROM transactions r WHERE r.id = i.id FOR UPDATE) l),
     -- A record settled meanwhile is left alone; one still at stage 1 announces its acceptance first.
     ok AS MATERIALIZED (
       SELECT i.*, l.stage FROM items i JOIN locked l ON l.id = i.id WHERE l.stage < 3),
     lt AS (
       INSERT INTO ledger_transactions (kind, reference) SELECT 'cash_out_settle', transaction_id FROM ok ORDER BY n RETURNING id, reference),
     entries AS (
       INSERT INTO ledger_entries (ledger_transaction_id, ledger_account_id, amount)
       SELECT lt.id, la.id, v.amount FROM lt JOIN ok i ON i.transaction_id = lt.reference
        CROSS JOIN LATERAL (VALUES (1, 'account:' || i.account_id || ':pending', -(i.amount + i.fee_amount)),
                                   (2, 'institution:central_bank', i.amount), (3, 'institution:fees', i.fee_amount)) AS v(k, code, amount)
         JOIN ledger_accounts la ON la.code = v.code
        WHERE v.amount <> 0 ORDER BY la.id, i.n, v.k
       RETURNING 1),
     t AS (
       UPDATE transactions r SET status = 1, payment_status = 'settled', stage = 3, completed_at = i.settled_at, updated_at = $3
         FROM ok i WHERE r.id = i.id RETURNING r.id),
     ev AS (
       INSERT INTO outbox_events (event, merchant_id, account_id, subject, payload)
       SELECT e.event, i.merchant_id, i.account_id, i.transaction_id, e.payload
         FROM ok i JOIN t ON t.id = i.id
        CROSS JOIN LATERAL (VALUES (1, 'pix.payout.processing', i.processing), (2, 'pix.payout.confirmed', i.confirmed)) AS e(k, event, payload)
        WHERE e.k = 2 OR i.stage = 1
        ORDER BY i.n, e.k
       RETURNING 1),
     -- Selected below so that it runs (a CTE nobody reads is not evaluated); a false one aborts.
     checks AS (
       SELECT statement_assert((SELECT count(*) FROM entries) = (SELECT COALESCE(sum(CASE WHEN fee_amount > 0 THEN 3 ELSE 2 END), 0) FROM ok), 'settlement batch: ledger entries missing')
          AND statement_assert((SELECT count(*) FROM t) = (SELECT count(*) FROM ok), 'settlement batch: records not settled')
          AND statement_assert((SELECT count(*) FROM ev) = (SELECT COALESCE(sum(CASE WHEN stage = 1 THEN 2 ELSE 1 END), 0) FROM ok), 'settlement batch: events missing') AS ok)
     SELECT (SELECT array_agg(notification_id) FROM ins) AS fresh, (SELECT count(*) FROM ok)::int AS settled, (SELECT ok FROM checks) AS asserted`;

/**
 * The settlements of one delivery batch in ONE statement, outside any transaction (one round trip;
 * the locks held only while it runs and commits): every notification of `notifications` into
 * rail_inbox, under the day of its own time `at` (ON CONFLICT DO NOTHING: a redelivered
 * notification does nothing); for each settlement whose
 * notification was new, its record locked (id order) and, if it is not settled yet, the ledger
 * transaction (pending -> central bank + fees), the record settled (stage 3) and its events —
 * `pix.payout.processing` first when the record is still at stage 1 as of its lock (a settlement
 * that overtook the acknowledgement), then `pix.payout.confirmed`. The entries are written in
 * ledger-account id order, so the running balance takes the accounts' pending books last, in the
 * lock order of every money movement (records first, then books: two batches, or a batch and a
 * reserve batch, never deadlock). The statement's invariants are asserted inside it
 * (`statement_assert`): it commits all of them or nothing. Returns the notification ids that were new.
 */
export async function settleCashOuts(sql: Sql, notifications: readonly { id: string; at: Date }[], items: readonly CashOutSettlement[], now: Date): Promise<Set<string>> {
  const json = JSON.stringify(
    items.map((s, n) => ({
      n,
      notification_id: s.notificationId,
      id: s.row.id,
      transaction_id: s.row.transaction_id,
      account_id: s.row.account_id,
      merchant_id: s.row.merchant_id,
      amount: s.row.amount,
      fee_amount: s.row.fee_amount,
      settled_at: s.settledAt.toISOString(),
      processing: s.processing,
      confirmed: s.confirmed,
    })),
  );
  const [result] = await sql.query<{ fresh: string[] | null; settled: number; asserted: boolean }>(SETTLE_CASH_OUTS, [notifications.map((n) => n.id), json, now, notifications.map((n) => dayStart(n.at))]);
  if (result!.settled > 0) wakeLocal(sql, 'outbox'); // as emitEvent does
  return new Set(result!.fresh ?? []);
}
