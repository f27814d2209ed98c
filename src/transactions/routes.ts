import type { FastifyInstance } from 'fastify';
import type { AppContext } from '../context.js';
import { principal } from '../external/pipeline.js';
import { lookup, parseListParams, statement, transactionList, transactionReceipt } from './statement.js';

type IdParams = { Params: { id: string } };

/** GET /statement (statement:read), GET /transactions, the lookups and the receipt (transfer:read). */
export async function transactionRoutes(app: FastifyInstance, ctx: AppContext) {
  const read = { config: { permission: 'transfer:read' as const } };
  app.get('/statement', { config: { permission: 'statement:read' } }, async (req) =>
    statement(ctx, principal(req).accountId, parseListParams(req.query)),
  );
  app.get('/transactions', read, async (req) => transactionList(ctx, principal(req).accountId, parseListParams(req.query)));
  app.get<IdParams>('/transactions/:id', read, async (req) => lookup(ctx, principal(req).accountId, 'any_id', req.params.id));
  app.get<{ Params: { e2e_id: string } }>('/transactions/e2e/:e2e_id', read, async (req) =>
    lookup(ctx, principal(req).accountId, 'end_to_end_id', req.params.e2e_id),
  );
  app.get<{ Params: { tag: string } }>('/transactions/tag/:tag', read, async (req) => lookup(ctx, principal(req).accountId, 'tag', req.params.tag));
  app.get<{ Params: { external_id: string } }>('/transactions/ref/:external_id', read, async (req) =>
    lookup(ctx, principal(req).accountId, 'external_id', req.params.external_id),
  );
  app.get<IdParams>('/transactions/:id/receipt', read, async (req) => transactionReceipt(ctx, principal(req).accountId, req.params.id));
}
