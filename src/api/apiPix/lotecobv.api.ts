import { z } from 'zod';
import { cobvBody, cobvPatchBody } from './cobv.api.js';
import { listQueryShape } from './listQuery.js';
import { pixRoute } from './spec.js';

/** The `lotecobv` operations (batches of due-date charges): docs/api-pix.md, "lotecobv". */
export const loteIdParam = z.object({ id: z.string().regex(/^\d{1,15}$/, 'deve ser um número inteiro não negativo').transform(Number) });
const txid = z.string().regex(/^[A-Za-z0-9]{26,35}$/, 'deve ter de 26 a 35 letras ou dígitos');

export const lotePutBody = z.object({
  descricao: z.string().max(140),
  cobsv: z.array(cobvBody.extend({ txid })).min(1),
});
export const lotePatchBody = z.object({
  descricao: z.string().max(140).optional(),
  cobsv: z.array(cobvPatchBody.extend({ txid })).min(1),
});
export const loteListQuery = z.object(listQueryShape);

const Lote = z.looseObject({ id: z.number().int(), descricao: z.string(), criacao: z.string(), cobsv: z.array(z.looseObject({ txid: z.string(), status: z.string() })) });
const Problem = z.looseObject({ type: z.string(), title: z.string(), status: z.number().int(), detail: z.string().optional() });
const problems = { invalid: 'LoteCobVOperacaoInvalida', notFound: 'LoteCobVNaoEncontrado', subject: 'loteCobV' };
const readProblems = { invalid: 'LoteCobVConsultaInvalida', notFound: 'LoteCobVNaoEncontrado', subject: 'loteCobV' };
const common = { 400: { description: 'Requisição inválida', schema: Problem }, 403: { description: 'Acesso negado', schema: Problem }, 503: { description: 'Serviço indisponível', schema: Problem } };
const tag = 'API Pix: lotecobv';

export const loteApi = {
  put: pixRoute({
    method: 'PUT', path: '/lotecobv/:id', operationId: 'apiPixLoteCobvPut', summary: 'Cria (ou reenvia) um lote de cobranças com vencimento', tag,
    scope: 'lotecobv.write', problems, params: loteIdParam, body: lotePutBody,
    responses: { 202: { description: 'Lote processado: cada cobrança CRIADA ou NEGADA (GET /lotecobv/{id})' }, ...common, 404: { description: 'Não encontrado', schema: Problem } },
  }),
  patch: pixRoute({
    method: 'PATCH', path: '/lotecobv/:id', operationId: 'apiPixLoteCobvPatch', summary: 'Revisa cobranças de um lote', tag,
    scope: 'lotecobv.write', problems, params: loteIdParam, body: lotePatchBody,
    responses: { 202: { description: 'Revisões processadas' }, ...common, 404: { description: 'Não encontrado', schema: Problem } },
  }),
  get: pixRoute({
    method: 'GET', path: '/lotecobv/:id', operationId: 'apiPixLoteCobvGet', summary: 'Consulta um lote de cobranças com vencimento', tag,
    scope: 'lotecobv.read', problems: readProblems, params: loteIdParam,
    responses: { 200: { description: 'O lote', schema: Lote }, ...common, 404: { description: 'Não encontrado', schema: Problem } },
  }),
  list: pixRoute({
    method: 'GET', path: '/lotecobv', operationId: 'apiPixLoteCobvList', summary: 'Lista lotes de cobranças com vencimento', tag,
    scope: 'lotecobv.read', problems: readProblems, query: loteListQuery,
    responses: { 200: { description: 'Lotes', schema: z.looseObject({ parametros: z.looseObject({}), lotes: z.array(Lote) }) }, ...common },
  }),
};
