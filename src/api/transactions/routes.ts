import type { FastifyInstance } from 'fastify';
import type { AppContext } from '../../context.js';
import { principal } from '../../external/pipeline.js';
import { QueryReader, readPageAndDates } from '../../http/query.js';
import { mount } from '../../http/routeSpec.js';
import { STATEMENT_FILTERS, TRANSACTION_TYPES } from '../../transactions/repository.js';
import { lookup, statement, transactionList, transactionReceipt, type ListParams } from '../../transactions/statement.js';
import { transactionsApi as api } from './transactions.api.js';

type P = Record<string, string>;

/**
 * Reads the query string of the statement and the transaction list: page, per_page, date_from and
 * date_to (`readPageAndDates`), status and type; unknown parameters are ignored. A problem is the
 * 400 with `worked: false` beside `errors` (the spec's statement business errors carry it).
 */
export function parseListParams(raw: unknown): ListParams {
  const r = new QueryReader(raw);
  const { page, perPage, from, before } = readPageAndDates(r);
  const status = r.oneOf('status', STATEMENT_FILTERS);
  const type = r.oneOf('type', TRANSACTION_TYPES);
  r.done({ worked: true });
  return { page, perPage, query: { status, type, from, before } };
}

/** GET /statement (statement:read), GET /transactions, the lookups and the receipt (transfer:read). */
export async function transactionRoutes(app: FastifyInstance, ctx: AppContext) {
  mount(app, api.statement, async (req) => statement(ctx, principal(req).accountId, parseListParams(req.query)));
  mount(app, api.list, async (req) => transactionList(ctx, principal(req).accountId, parseListParams(req.query)));
  mount(app, api.byId, async (req) => lookup(ctx, principal(req).accountId, 'any_id', (req.params as P).id!));
  mount(app, api.byE2e, async (req) => lookup(ctx, principal(req).accountId, 'end_to_end_id', (req.params as P).e2e_id!));
  mount(app, api.byTag, async (req) => lookup(ctx, principal(req).accountId, 'tag', (req.params as P).tag!));
  mount(app, api.byExternalId, async (req) => lookup(ctx, principal(req).accountId, 'external_id', (req.params as P).external_id!));
  mount(app, api.receipt, async (req) => transactionReceipt(ctx, principal(req).accountId, (req.params as P).id!));
}
