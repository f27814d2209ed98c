import type { FastifyInstance } from 'fastify';
import { getLote, listLotes, patchLote, putLote } from '../../apiPix/cobv/lotes.js';
import type { LoteItemRow, LoteRow } from '../../apiPix/cobv/loteStore.js';
import type { CobvPatch } from '../../apiPix/cobv/types.js';
import type { AppContext } from '../../context.js';
import { DomainError } from '../../errors/catalog.js';
import { parseFields } from '../../errors/fields.js';
import { toPixProblem } from '../../http/apiPixProblems.js';
import { HttpError } from '../../http/errors.js';
import { mount } from '../../http/routeSpec.js';
import { isoZ } from '../../lib/clock.js';
import { pixCaller } from './bearer.js';
import { commandOf, patchOf } from './cobv.routes.js';
import { jsonObjectBody, paginacao, parseListQuery } from './listQuery.js';
import { loteApi, loteIdParam, loteListQuery, lotePatchBody, lotePutBody } from './lotecobv.api.js';

/** A refused request of a batch, as the problem PUT/PATCH /cobv/{txid} would have answered. */
function problemOf(err: DomainError): Record<string, unknown> {
  const problem = toPixProblem(err, new HttpError(500, {}), { invalid: 'CobVOperacaoInvalida', notFound: 'CobVNaoEncontrada', subject: 'cobv' });
  return problem.body as Record<string, unknown>;
}

function loteView(lote: LoteRow, items: LoteItemRow[]) {
  return {
    id: lote.id,
    descricao: lote.descricao,
    criacao: isoZ(lote.created_at)!,
    cobsv: items.map((i) => ({
      txid: i.txid,
      status: i.status,
      ...(i.problema !== null ? { problema: i.problema } : {}),
      ...(i.created_at !== null ? { criacao: isoZ(i.created_at)! } : {}),
    })),
  };
}

/** A lote id in the path that cannot exist: no such batch (404). */
function existingId(params: unknown): number {
  const parsed = loteIdParam.safeParse(params);
  if (!parsed.success) throw new DomainError('not_found', { message: 'Lote não encontrado' });
  return parsed.data.id;
}

/** The `lotecobv` operations of /api/pix/v2 (src/apiPix/cobv/lotes.ts underneath). */
export async function loteCobvRoutes(app: FastifyInstance, ctx: AppContext) {
  const owner = (req: Parameters<typeof pixCaller>[0]) => {
    const c = pixCaller(req);
    return { merchantId: c.merchantId, accountId: c.accountId };
  };

  mount(app, loteApi.put, async (req, reply) => {
    const { id } = parseFields(loteIdParam, req.params);
    const body = parseFields(lotePutBody, jsonObjectBody(req.body));
    await putLote(ctx, owner(req), id, body.descricao, body.cobsv.map(({ txid, ...cobv }) => ({ txid, command: commandOf(cobv) })), problemOf);
    return reply.code(202).send();
  });

  mount(app, loteApi.patch, async (req, reply) => {
    const id = existingId(req.params);
    const body = parseFields(lotePatchBody, jsonObjectBody(req.body));
    const requests = body.cobsv.map(({ txid, ...cobv }) => ({ txid, command: patchOf(cobv) as CobvPatch }));
    await patchLote(ctx, owner(req), id, body.descricao, requests, problemOf);
    return reply.code(202).send();
  });

  mount(app, loteApi.get, async (req) => {
    const id = existingId(req.params);
    const { lote, items } = await getLote(ctx, owner(req).accountId, id);
    return loteView(lote, items);
  });

  mount(app, loteApi.list, async (req) => {
    const { query, page } = parseListQuery(loteListQuery, req.query);
    const { lotes, total } = await listLotes(ctx, owner(req).accountId, page.from, page.to, page.offset, page.perPage);
    return { parametros: { inicio: query.inicio, fim: query.fim, paginacao: paginacao(page, total) }, lotes: lotes.map((l) => loteView(l.lote, l.items)) };
  });
}
