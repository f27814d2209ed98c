import type { Sql } from '../db/db.js';

/**
 * Statement records (table `transactions`): one row per money movement a merchant sees, and the
 * reads of the statement. Written only through src/transactions/records.ts (and the cash-out's
 * batched statements, src/pix/store/), in the same database transaction as their ledger postings.
 */
export interface TransactionRow {
  id: string;
  transaction_id: string;
  account_id: number;
  kind: string;
  type: 'pix' | 'ted' | 'internal';
  direction: 'inbound' | 'outbound';
  status: number;
  payment_status: string | null;
  stage: number;
  end_to_end_id: string | null;
  external_id: string | null;
  tag: string | null;
  amount: number;
  fee_amount: number;
  description: string;
  counterparty_name: string;
  recipient_key: string | null;
  recipient_key_type: string | null;
  recipient_document: string | null;
  recipient_ispb: string | null;
  payer_document: string | null;
  payer_ispb: string | null;
  payer_bank_name: string | null;
  original_id: string | null;
  request_fingerprint: string | null;
  /** What the receiver returned of a cash-out (base units; 0 for any other record). */
  returned_amount: number;
  /** The limit windows a cash-out's reservation counted in (null: not counted in that window). */
  limit_day_start: Date | null;
  limit_night_start: Date | null;
  /** The payer of a cash-out's payment order (with payer_document). */
  payer_name: string | null;
  /** A cash-out failed on a rail timeout that a repeat may reserve and send again. */
  resumable: boolean;
  /** When the rail held a cash-out for analysis. */
  held_at: Date | null;
  /** Why the record was rejected or failed (the rail's code and reason, or this institution's). */
  reason_code: string | null;
  reason: string | null;
  /** The return code of a refund, MED refund or payout return. */
  return_code: string | null;
  /** The infraction of a MED refund. */
  infraction_id: string | null;
  /** The receiver's bank of an outbound record as the directory (or the original's payer) named it. */
  recipient_bank_name: string | null;
  /** Why an inbound PIX that carried a txid paid no charge (src/pix/cashin/charges.ts UnmatchedReason). */
  charge_unmatched_reason: string | null;
  /** A TEF's other account (a debit's destination, a credit's source) when both are the merchant's. */
  counterpart_account_id: number | null;
  /** A TEF credit's debit record. */
  pair_id: string | null;
  /** When the record was rejected (status 3) or failed (status 4), where the rail said so. */
  failed_at: Date | null;
  /** What the merchant or the payer supplied (a cash-out's txid and emv, an inbound PIX's txid). */
  metadata: Record<string, unknown>;
  created_at: Date;
  updated_at: Date;
  completed_at: Date | null;
}

/** Internal status codes of a statement record. */
export const TX_STATUS = { completed: 1, pending: 2, rejected: 3, failed: 4 } as const;

// ---- statement, transaction list and lookups ----

/** The spec's statement `status` filter values (applied to the generated `statement_status`). */
export const STATEMENT_FILTERS = ['settled', 'rejected', 'failed', 'processing'] as const;
export type StatementFilter = (typeof STATEMENT_FILTERS)[number];
export const TRANSACTION_TYPES = ['pix', 'ted', 'internal'] as const;

export interface ListQuery {
  accountId: number;
  status?: StatementFilter | undefined;
  type?: (typeof TRANSACTION_TYPES)[number] | undefined;
  /** Inclusive lower bound. */
  from?: Date | undefined;
  /** Exclusive upper bound. */
  before?: Date | undefined;
  limit: number;
  offset: number;
}

export type ListedTransaction = RecordRow & { statement_status: string | null };

/** WHERE clauses of one list query; parameters are appended to `params` (shared by a UNION). */
function listWhere(q: ListQuery, statusClause: string, params: unknown[]): string {
  const p = (v: unknown) => `$${params.push(v)}`;
  const clauses = [`account_id = ${p(q.accountId)}`, statusClause];
  if (q.type) clauses.push(`type = ${p(q.type)}`);
  if (q.from) clauses.push(`created_at >= ${p(q.from)}`);
  if (q.before) clauses.push(`created_at < ${p(q.before)}`);
  return clauses.join(' AND ');
}

const ORDER = 'ORDER BY created_at DESC, id DESC';

/**
 * The transaction_id of a record's original (a refund's, a MED refund's, a payout return's), read
 * from the row `original_id` points at (migration 0860: no longer copied into metadata).
 */
export const ORIGINAL_TRANSACTION_ID = `(SELECT o.transaction_id FROM transactions o WHERE o.id = transactions.original_id) AS original_transaction_id`;

export type RecordRow = TransactionRow & { original_transaction_id: string | null };

function pageSelect(q: ListQuery, statusClause: string, params: unknown[], merged: boolean, original = false): string {
  const where = listWhere(q, statusClause, params);
  return `SELECT *, ${merged} AS merged${original ? `, ${ORIGINAL_TRANSACTION_ID}` : ''} FROM transactions WHERE ${where} ${ORDER} LIMIT $${params.push(q.limit)} OFFSET $${params.push(q.offset)}`;
}

const filterClause = (status: StatementFilter) => `statement_status = '${status}'`;

export type StatementRow = ListedTransaction & { merged: boolean };

/**
 * A statement page. The statement is one list in one order, paged by `limit`/`offset`:
 *   - with `merge` (no status filter, or `processing`): first the outbound PIX still in flight
 *     (`merged: true`), newest first, then every other row, newest first — sort key
 *     (in flight, created_at, id) descending;
 *   - without: the rows of the filter, newest first.
 * So the in-flight rows lead page 1 and, when there are more than `per_page` of them, continue on
 * page 2 and after; no page holds more than `limit` rows and, on a snapshot, walking the pages
 * lists each row exactly once. Each part is read from one index (migration 0100) in order, at most
 * offset + limit rows of each.
 */
export async function listStatement(sql: Sql, q: ListQuery, merge: boolean): Promise<StatementRow[]> {
  const params: unknown[] = [];
  const clause = q.status ? filterClause(q.status) : `statement_status IS NOT NULL AND statement_status <> 'in_flight'`;
  if (!merge) return sql.query<StatementRow>(pageSelect(q, clause, params, false), params);
  const head = { ...q, limit: q.offset + q.limit, offset: 0 };
  const inFlight = pageSelect(head, `statement_status = 'in_flight'`, params, true);
  const regular = pageSelect(head, clause, params, false);
  return sql.query<StatementRow>(
    `SELECT * FROM ((${inFlight}) UNION ALL (${regular})) page ORDER BY merged DESC, created_at DESC, id DESC
     LIMIT $${params.push(q.limit)} OFFSET $${params.push(q.offset)}`,
    params,
  );
}

/** GET /transactions: like the statement, with records in flight in their place instead of merged. */
export async function listTransactions(sql: Sql, q: ListQuery): Promise<ListedTransaction[]> {
  const clause = !q.status
    ? 'statement_status IS NOT NULL'
    : q.status === 'processing'
      ? `statement_status IN ('processing', 'in_flight')`
      : filterClause(q.status);
  const params: unknown[] = [];
  return sql.query<ListedTransaction>(pageSelect(q, clause, params, false, true), params);
}

export type LookupKey = 'id' | 'transaction_id' | 'end_to_end_id' | 'external_id' | 'tag';

/** One record of the account by one of its ids; by tag, the newest record with that tag. */
export async function findInAccount(sql: Sql, accountId: number, key: LookupKey, value: string): Promise<ListedTransaction | undefined> {
  const [row] = await sql.query<ListedTransaction>(
    `SELECT *, ${ORIGINAL_TRANSACTION_ID} FROM transactions WHERE account_id = $1 AND ${key} = $2 ORDER BY created_at DESC, id DESC LIMIT 1`,
    [accountId, value],
  );
  return row;
}
