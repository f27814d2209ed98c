import type { FastifyInstance } from 'fastify';
import { decimalToCents } from '../../apiPix/amount.js';
import type { CobStatus } from '../../apiPix/cobStore.js';
import { COB, createCob, getCob, listCobs, paymentOfCob, reviseCob, type CobInput, type CobPatch } from '../../apiPix/cobs.js';
import type { AppContext } from '../../context.js';
import { DomainError, invalidFields } from '../../errors/catalog.js';
import { parseFields } from '../../errors/fields.js';
import { mount } from '../../http/routeSpec.js';
import { pixCaller } from './bearer.js';
import { cobApi, cobBody, cobGetQuery, cobListQuery, cobPatchBody, txidParam } from './cob.api.js';
import { jsonObjectBody, paginacao, parseListQuery } from './listQuery.js';
import { cobView } from './views.js';
import type { z } from 'zod';

/** The `cob` operations of /api/pix/v2 (src/apiPix/cobs.ts underneath). */
function refuseWithdrawal(valor: { retirada?: unknown } | undefined): void {
  if (valor?.retirada !== undefined) throw invalidFields({ 'valor.retirada': ['Pix Saque e Pix Troco não são oferecidos por esta instituição'] });
}

function inputOf(body: z.output<typeof cobBody>): CobInput {
  refuseWithdrawal(body.valor);
  return {
    chave: body.chave,
    amountCents: decimalToCents(body.valor.original)!,
    modalidadeAlteracao: body.valor.modalidadeAlteracao ?? 0,
    expiracao: body.calendario?.expiracao ?? COB.defaultExpiracao,
    locId: body.loc?.id,
    request: {
      ...(body.devedor ? { devedor: body.devedor } : {}),
      ...(body.solicitacaoPagador !== undefined ? { solicitacaoPagador: body.solicitacaoPagador } : {}),
      ...(body.infoAdicionais !== undefined ? { infoAdicionais: body.infoAdicionais } : {}),
    },
  };
}

function patchOf(body: z.output<typeof cobPatchBody>): CobPatch {
  refuseWithdrawal(body.valor);
  const patch: CobPatch = {};
  if (body.status !== undefined) patch.remove = true;
  if (body.chave !== undefined) patch.chave = body.chave;
  if (body.valor?.original !== undefined) patch.amountCents = decimalToCents(body.valor.original)!;
  if (body.valor?.modalidadeAlteracao !== undefined) patch.modalidadeAlteracao = body.valor.modalidadeAlteracao;
  if (body.calendario?.expiracao !== undefined) patch.expiracao = body.calendario.expiracao;
  if (body.loc !== undefined) patch.locId = body.loc.id;
  if (body.devedor !== undefined) patch.devedor = body.devedor;
  if (body.solicitacaoPagador !== undefined) patch.solicitacaoPagador = body.solicitacaoPagador;
  if (body.infoAdicionais !== undefined) patch.infoAdicionais = body.infoAdicionais;
  return patch;
}

/** A txid in the path that cannot exist: no such charge (404), for the reads and revisions. */
function existingTxid(params: unknown): string {
  const parsed = txidParam.safeParse(params);
  if (!parsed.success) throw new DomainError('not_found', { message: 'Cobrança não encontrada' });
  return parsed.data.txid;
}

export async function cobRoutes(app: FastifyInstance, ctx: AppContext) {
  const host = ctx.config.apiPixLocationHost;
  const owner = (req: Parameters<typeof pixCaller>[0]) => {
    const c = pixCaller(req);
    return { merchantId: c.merchantId, accountId: c.accountId };
  };
  const answer = async (row: Awaited<ReturnType<typeof createCob>>) => cobView(host, row, { ...row }, await paymentOfCob(ctx.db, row));

  mount(app, cobApi.put, async (req, reply) => {
    const { txid } = parseFields(txidParam, req.params);
    const row = await createCob(ctx, owner(req), txid, inputOf(parseFields(cobBody, jsonObjectBody(req.body))));
    return reply.code(201).send(await answer(row));
  });

  mount(app, cobApi.post, async (req, reply) => {
    const row = await createCob(ctx, owner(req), undefined, inputOf(parseFields(cobBody, jsonObjectBody(req.body))));
    return reply.code(201).send(await answer(row));
  });

  mount(app, cobApi.patch, async (req) => {
    const txid = existingTxid(req.params);
    const row = await reviseCob(ctx, owner(req), txid, patchOf(parseFields(cobPatchBody, jsonObjectBody(req.body))));
    return answer(row);
  });

  mount(app, cobApi.get, async (req) => {
    const txid = existingTxid(req.params);
    const { revisao } = parseFields(cobGetQuery, req.query ?? {});
    const { row, state } = await getCob(ctx, owner(req).accountId, txid, revisao);
    return cobView(host, row, state, await paymentOfCob(ctx.db, row));
  });

  mount(app, cobApi.list, async (req) => {
    const { query, page } = parseListQuery(cobListQuery, req.query);
    if (query.cpf !== undefined && query.cnpj !== undefined) throw invalidFields({ cpf: ['não pode ser usado junto com cnpj'] });
    const { rows, total } = await listCobs(ctx, {
      accountId: owner(req).accountId,
      from: page.from,
      to: page.to,
      ...(query.cpf !== undefined ? { cpf: query.cpf } : {}),
      ...(query.cnpj !== undefined ? { cnpj: query.cnpj } : {}),
      ...(query.locationPresente !== undefined ? { locationPresent: query.locationPresente } : {}),
      ...(query.status !== undefined ? { status: query.status as CobStatus } : {}),
      offset: page.offset,
      limit: page.perPage,
    });
    const cobs = [];
    for (const row of rows) cobs.push(cobView(host, row, { ...row }, await paymentOfCob(ctx.db, row)));
    const parametros = {
      inicio: query.inicio,
      fim: query.fim,
      ...(query.cpf !== undefined ? { cpf: query.cpf } : {}),
      ...(query.cnpj !== undefined ? { cnpj: query.cnpj } : {}),
      ...(query.locationPresente !== undefined ? { locationPresente: query.locationPresente } : {}),
      ...(query.status !== undefined ? { status: query.status } : {}),
      paginacao: paginacao(page, total),
    };
    return { parametros, cobs };
  });
}
