import type { FastifyInstance } from 'fastify';
import type { z } from 'zod';
import { getCobv, listCobvs, putCobv, reviseCobv } from '../../apiPix/cobv/cobvs.js';
import type { CobvStatus } from '../../apiPix/cobv/store.js';
import type { CobvCommand, CobvPatch } from '../../apiPix/cobv/types.js';
import type { AppContext } from '../../context.js';
import { DomainError, invalidFields } from '../../errors/catalog.js';
import { parseFields } from '../../errors/fields.js';
import { mount } from '../../http/routeSpec.js';
import { findMerchant } from '../../merchants/repository.js';
import { pixCaller } from './bearer.js';
import { cobvApi, cobvBody, cobvGetQuery, cobvListQuery, cobvPatchBody, txidParam } from './cobv.api.js';
import { cobvView, type Receiver } from './cobvViews.js';
import { jsonObjectBody, paginacao, parseListQuery } from './listQuery.js';

/** The standard's default validadeAposVencimento: 30 days. */
const DEFAULT_DAYS_AFTER_DUE = 30;

export function commandOf(body: z.output<typeof cobvBody>): CobvCommand {
  return {
    dueDate: body.calendario.dataDeVencimento,
    daysAfterDue: body.calendario.validadeAposVencimento ?? DEFAULT_DAYS_AFTER_DUE,
    devedor: body.devedor,
    locId: body.loc?.id,
    valor: body.valor,
    chave: body.chave,
    solicitacaoPagador: body.solicitacaoPagador,
    infoAdicionais: body.infoAdicionais,
  };
}

export function patchOf(body: z.output<typeof cobvPatchBody>): CobvPatch {
  const patch: CobvPatch = {};
  if (body.status !== undefined) patch.remove = true;
  if (body.calendario?.dataDeVencimento !== undefined) patch.dueDate = body.calendario.dataDeVencimento;
  if (body.calendario?.validadeAposVencimento !== undefined) patch.daysAfterDue = body.calendario.validadeAposVencimento;
  if (body.devedor !== undefined) patch.devedor = body.devedor;
  if (body.loc !== undefined) patch.locId = body.loc.id;
  if (body.chave !== undefined) patch.chave = body.chave;
  if (body.solicitacaoPagador !== undefined) patch.solicitacaoPagador = body.solicitacaoPagador;
  if (body.infoAdicionais !== undefined) patch.infoAdicionais = body.infoAdicionais;
  if (body.valor !== undefined) patch.valorPatch = body.valor;
  return patch;
}

/** A txid in the path that cannot exist: no such charge (404), for the reads and revisions. */
function existingTxid(params: unknown): string {
  const parsed = txidParam.safeParse(params);
  if (!parsed.success) throw new DomainError('not_found', { message: 'Cobrança não encontrada' });
  return parsed.data.txid;
}

/** The `cobv` operations of /api/pix/v2 (src/apiPix/cobv/ underneath). */
export async function cobvRoutes(app: FastifyInstance, ctx: AppContext) {
  const host = ctx.config.apiPixLocationHost;
  const owner = (req: Parameters<typeof pixCaller>[0]) => {
    const c = pixCaller(req);
    return { merchantId: c.merchantId, accountId: c.accountId };
  };
  const receiver = async (merchantId: number): Promise<Receiver> => {
    const m = await findMerchant(ctx.db, merchantId);
    return { name: m?.name ?? '', document: m?.document ?? '' };
  };

  mount(app, cobvApi.put, async (req, reply) => {
    const { txid } = parseFields(txidParam, req.params);
    const o = owner(req);
    const row = await putCobv(ctx, o, txid, commandOf(parseFields(cobvBody, jsonObjectBody(req.body))));
    return reply.code(201).send(cobvView(host, row, { ...row }, await receiver(o.merchantId)));
  });

  mount(app, cobvApi.patch, async (req) => {
    const txid = existingTxid(req.params);
    const o = owner(req);
    const row = await reviseCobv(ctx, o, txid, patchOf(parseFields(cobvPatchBody, jsonObjectBody(req.body))));
    return cobvView(host, row, { ...row }, await receiver(o.merchantId));
  });

  mount(app, cobvApi.get, async (req) => {
    const txid = existingTxid(req.params);
    const { revisao } = parseFields(cobvGetQuery, req.query ?? {});
    const o = owner(req);
    const { row, state } = await getCobv(ctx, o.accountId, txid, revisao);
    return cobvView(host, row, state, await receiver(o.merchantId));
  });

  mount(app, cobvApi.list, async (req) => {
    const { query, page } = parseListQuery(cobvListQuery, req.query);
    if (query.cpf !== undefined && query.cnpj !== undefined) throw invalidFields({ cpf: ['não pode ser usado junto com cnpj'] });
    const o = owner(req);
    const { rows, total } = await listCobvs(ctx, {
      accountId: o.accountId,
      from: page.from,
      to: page.to,
      ...(query.cpf !== undefined ? { cpf: query.cpf } : {}),
      ...(query.cnpj !== undefined ? { cnpj: query.cnpj } : {}),
      ...(query.locationPresente !== undefined ? { locationPresent: query.locationPresente } : {}),
      ...(query.status !== undefined ? { status: query.status as CobvStatus } : {}),
      ...(query.loteCobVId !== undefined ? { loteId: query.loteCobVId } : {}),
      offset: page.offset,
      limit: page.perPage,
    });
    const rec = await receiver(o.merchantId);
    const cobs = rows.map((row) => cobvView(host, row, { ...row }, rec));
    const parametros = {
      inicio: query.inicio,
      fim: query.fim,
      ...(query.cpf !== undefined ? { cpf: query.cpf } : {}),
      ...(query.cnpj !== undefined ? { cnpj: query.cnpj } : {}),
      ...(query.locationPresente !== undefined ? { locationPresente: query.locationPresente } : {}),
      ...(query.status !== undefined ? { status: query.status } : {}),
      ...(query.loteCobVId !== undefined ? { loteCobVId: query.loteCobVId } : {}),
      paginacao: paginacao(page, total),
    };
    return { parametros, cobs };
  });
}
