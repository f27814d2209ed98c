import type { Sql } from '../../db/db.js';
import { windowParams, type UsageWindow } from './limitWindows.js';

/** Step 1 of cash-outs in few round trips (issue 12): what a batch reads of its accounts. */

/** What step 1 of a batch of cash-outs reads of one of its accounts, under the account lock. */
export interface CashOutLockState {
  account_id: number;
  merchant_id: number;
  books: { book: string; balance: number }[];
  cash_out_fee_cents: number;
  cash_out_max_amount_cents: number;
  cash_out_daily_limit_cents: number;
  cash_out_nighttime_limit_cents: number;
  holder_name: string;
  holder_document: string;
  /** Sent so far in each window asked for, by window kind. */
  usage: Record<string, number> | null;
  /** Records of the account with one of the external_ids asked for: external_id -> record id. */
  existing: Record<string, string> | null;
}

/**
 * What step 1 reads of its accounts: the books locked (`lock`: waiting for them, or `skip`: only
 * those free now, SKIP LOCKED) or as of one snapshot.
 */
function cashOutStateSql(lock: 'wait' | 'skip' | false): string {
  return `WITH locked AS MATERIALIZED (
       SELECT id, account_id, book, balance, xmin::text AS version FROM ledger_accounts
        WHERE account_id = ANY($1::bigint[]) ORDER BY id${lock === 'wait' ? ' FOR UPDATE' : lock === 'skip' ? ' FOR UPDATE SKIP LOCKED' : ''})${
          lock ? ',\n     stale AS (SELECT EXISTS (SELECT 1 FROM locked l JOIN ledger_accounts s ON s.id = l.id WHERE s.xmin::text <> l.version) AS stale)' : ''
        }
     SELECT a.id::int AS account_id, a.merchant_id::int AS merchant_id,
            (SELECT json_agg(json_build_object('book', l.book, 'balance', l.balance)) FROM locked l WHERE l.account_id = a.id) AS books,
            ${lock ? '(SELECT stale FROM stale)' : 'false'} AS stale,
            ${
              lock === 'skip'
                ? '(SELECT count(*) FROM locked l WHERE l.account_id = a.id) < (SELECT count(*) FROM ledger_accounts s WHERE s.account_id = a.id)'
                : 'false'
            } AS busy,
            a.cash_out_fee_cents, a.cash_out_max_amount_cents, a.cash_out_daily_limit_cents, a.cash_out_nighttime_limit_cents,
            m.name AS holder_name, m.document AS holder_document,
            (SELECT json_object_agg(u.window_kind, u.amount) FROM cash_out_usage u
               JOIN unnest($2::text[], $3::timestamptz[]) AS w(kind, start) ON u.window_kind = w.kind AND u.window_start = w.start
              WHERE u.account_id = a.id) AS usage,
            -- One probe of the unique (account_id, external_id) index per external_id of the
            -- account (LIMIT 1: a nested loop, whatever the statistics of a young table say).
            (SELECT json_object_agg(e.external_id, t.id) FROM unnest($4::bigint[], $5::text[]) AS e(account_id, external_id)
               CROSS JOIN LATERAL (SELECT t.id FROM transactions t WHERE t.account_id = e.account_id AND t.external_id = e.external_id LIMIT 1) t
              WHERE e.account_id = a.id) AS existing
       FROM accounts a JOIN merchants m ON m.id = a.merchant_id WHERE a.id = ANY($1::bigint[])`;
}
const LOCK_FOR_CASH_OUTS = cashOutStateSql('wait');
const LOCK_FREE_FOR_CASH_OUTS = cashOutStateSql('skip');
const READ_FOR_CASH_OUTS = cashOutStateSql(false);

/** An external_id a batch names, with the account it must be unique in. */
export interface ExternalIdRef {
  accountId: number;
  externalId: string;
}

async function cashOutStates(
  sql: Sql,
  text: string,
  accountIds: readonly number[],
  windows: readonly UsageWindow[],
  externalIds: readonly ExternalIdRef[],
): Promise<{ stale: boolean; accounts: Map<number, CashOutLockState>; busy: Set<number> }> {
  const rows = await sql.query<CashOutLockState & { stale: boolean; busy: boolean }>(text, [
    accountIds,
    ...windowParams(windows),
    externalIds.map((e) => e.accountId),
    externalIds.map((e) => e.externalId),
  ]);
  const accounts = new Map<number, CashOutLockState>();
  const busy = new Set<number>();
  for (const { stale: _s, busy: b, ...row } of rows) {
    if (b) busy.add(Number(row.account_id));
    else accounts.set(Number(row.account_id), row);
  }
  for (const id of accountIds) if (!accounts.has(id) && !busy.has(id)) throw new Error(`account ${id} not found`);
  return { stale: rows.some((r) => r.stale), accounts, busy };
}

/**
 * One statement: locks the books of the accounts (FOR UPDATE, in ledger account id order, as
 * lockAccounts — the lock order of every money movement, so batches of several accounts never
 * deadlock each other or a TEF) and reads with them each account's holder and limits, its usage in
 * `windows` and which of `externalIds` it already has. A locked row is read as of the lock
 * (PostgreSQL re-reads it after waiting); the other rows as of the statement's snapshot, which can
 * be older when a lock was waited for — `stale` tells (a row version of the books newer than the
 * snapshot's), and the caller reads again: every change to usage or external_ids happens under
 * these locks together with a change of the books.
 */
export function lockForCashOuts(tx: Sql, accountIds: readonly number[], windows: readonly UsageWindow[], externalIds: readonly ExternalIdRef[]) {
  return cashOutStates(tx, LOCK_FOR_CASH_OUTS, accountIds, windows, externalIds);
}

/**
 * `lockForCashOuts` without waiting (SKIP LOCKED): the accounts with a book locked by another
 * transaction are `busy` (not in `accounts`; the books of theirs it did lock stay locked until the
 * transaction ends), so one account held elsewhere never holds up the others (issue 24).
 */
export function lockFreeForCashOuts(tx: Sql, accountIds: readonly number[], windows: readonly UsageWindow[], externalIds: readonly ExternalIdRef[]) {
  return cashOutStates(tx, LOCK_FREE_FOR_CASH_OUTS, accountIds, windows, externalIds);
}

/** What `lockForCashOuts` reads, without locking: one consistent snapshot (`stale` is false). */
export function readForCashOuts(sql: Sql, accountIds: readonly number[], windows: readonly UsageWindow[], externalIds: readonly ExternalIdRef[]) {
  return cashOutStates(sql, READ_FOR_CASH_OUTS, accountIds, windows, externalIds);
}
