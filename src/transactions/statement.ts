import type { Database } from '../db/db.js';
import { DomainError } from '../errors/catalog.js';
import * as merchants from '../merchants/repository.js';
import {
  findInAccount,
  listStatement,
  listTransactions,
  TX_STATUS,
  type ListQuery,
  type LookupKey,
} from './repository.js';
import { receipt, statementItem, transactionRecord } from './views.js';

/**
 * GET /statement, GET /transactions, the four lookups and the receipt. The query string is read at
 * the edge (src/api/transactions/routes.ts parseListParams: its 400 carries `worked: false`); these
 * take typed parameters.
 */

/** What these functions use (AppContext has it). */
export interface StatementDeps {
  db: Database;
  readDb: Database;
  config: { institutionIspb: string };
  institutionName: string;
}

export interface ListParams {
  page: number;
  perPage: number;
  query: Omit<ListQuery, 'accountId' | 'limit' | 'offset'>;
}

/**
 * The statement: `per_page` records per page. With no status filter or `processing`, the account's
 * outbound PIX in flight (stage below 3) are merged ahead of everything else, newest first, so they
 * lead page 1 and run on into the next pages when there are more than `per_page` of them; then the
 * other records, newest first (see listStatement).
 */
export async function statement(ctx: Pick<StatementDeps, 'readDb'>, accountId: number, p: ListParams) {
  const q: ListQuery = { accountId, ...p.query, limit: p.perPage, offset: (p.page - 1) * p.perPage };
  const merge = q.status === undefined || q.status === 'processing';
  const rows = await listStatement(ctx.readDb, q, merge);
  return {
    worked: true,
    data: rows.map((r) => statementItem(r, r.merged)),
    page: p.page,
    per_page: p.perPage,
  };
}

/** GET /transactions: the same parameters and envelope; records as the lookups show them. */
export async function transactionList(ctx: Pick<StatementDeps, 'readDb'>, accountId: number, p: ListParams) {
  const rows = await listTransactions(ctx.readDb, { accountId, ...p.query, limit: p.perPage, offset: (p.page - 1) * p.perPage });
  return { worked: true, data: rows.map(transactionRecord), page: p.page, per_page: p.perPage };
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
const NOT_FOUND = 'Transaction not found';

async function find(ctx: Pick<StatementDeps, 'db'>, accountId: number, key: LookupKey | 'any_id', value: string) {
  if (value.length > 256) return undefined;
  if (key !== 'any_id') return findInAccount(ctx.db, accountId, key, value);
  return UUID.test(value) ? findInAccount(ctx.db, accountId, 'id', value.toLowerCase()) : findInAccount(ctx.db, accountId, 'transaction_id', value);
}

/** A lookup: 200 `{worked: true, ...record}` or 404 `{errors: {not_found: 'Transaction not found'}}`. */
export async function lookup(ctx: Pick<StatementDeps, 'db'>, accountId: number, key: LookupKey | 'any_id', value: string) {
  const row = await find(ctx, accountId, key, value);
  if (!row) throw new DomainError('not_found', { message: NOT_FOUND });
  return { worked: true, ...transactionRecord(row) };
}

/** The receipt of a settled PIX; a clear 422 before settlement (or when there will be none). */
export async function transactionReceipt(ctx: StatementDeps, accountId: number, id: string) {
  const row = await find(ctx, accountId, 'any_id', id);
  if (!row) throw new DomainError('not_found', { message: NOT_FOUND });
  if (row.type !== 'pix') throw new DomainError('unprocessable_entity', { message: 'Receipts exist for PIX transactions only' });
  if (row.status === TX_STATUS.pending || row.stage < 3) {
    throw new DomainError('unprocessable_entity', { message: 'The receipt is available after settlement; the transaction is still being processed' });
  }
  if (row.status !== TX_STATUS.completed || !row.completed_at) throw new DomainError('unprocessable_entity', { message: 'The transaction was not settled, so it has no receipt' });
  const account = (await merchants.findAccount(ctx.db, row.account_id))!;
  const merchant = (await merchants.findMerchant(ctx.db, account.merchant_id))!;
  return receipt(row, merchant, { ispb: ctx.config.institutionIspb, name: ctx.institutionName });
}
