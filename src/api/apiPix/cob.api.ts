import { z } from 'zod';
import { COB_STATUSES } from '../../apiPix/cobStore.js';
import { DECIMAL_AMOUNT } from '../../apiPix/amount.js';
import { pixCnpj, pixCpf } from './documentFields.js';
import { booleanText, listQueryShape } from './listQuery.js';
import { ApiPixProblem, pixRoute } from './spec.js';

const PROBLEM = 'application/problem+json';

/**
 * The `cob` operations (charges paid at once) and the shapes pixgate accepts for them, written in
 * pixgate's words after the standard's rules: docs/api-pix.md, "cob".
 */
const decimal = z.string().regex(DECIMAL_AMOUNT, 'deve ser um valor decimal com duas casas, como 10.50 (até 9999999999.99)');
export const txidParam = z.object({ txid: z.string().regex(/^[A-Za-z0-9]{26,35}$/, 'deve ter de 26 a 35 letras ou dígitos') });

const devedor = z.union([
  z.object({ cpf: pixCpf, nome: z.string().min(1).max(200) }),
  z.object({ cnpj: pixCnpj, nome: z.string().min(1).max(200) }),
]);
const calendario = z.object({ expiracao: z.number().int().min(1, 'deve ser maior que zero').max(2_147_483_647).optional() });
const infoAdicionais = z.array(z.object({ nome: z.string().max(50), valor: z.string().max(200) })).max(50);
const valor = z.object({
  original: decimal.refine((v) => !/^0+\.00$/.test(v), 'não pode ser zero'),
  modalidadeAlteracao: z.number().int().min(0).max(1).optional(),
  retirada: z.unknown().optional(),
});

/** A location to link (`tipoCob`, which the standard asks for, must then be cob). */
const locRef = z.object({ id: z.number().int().min(1).max(Number.MAX_SAFE_INTEGER), tipoCob: z.literal('cob', 'deve ser cob').optional() });

/** PUT /cob/{txid}, POST /cob: a whole charge. */
export const cobBody = z.object({
  calendario,
  devedor: devedor.optional(),
  loc: locRef.optional(),
  valor,
  chave: z.string().min(1).max(77),
  solicitacaoPagador: z.string().max(140).optional(),
  infoAdicionais: infoAdicionais.optional(),
});

/** PATCH /cob/{txid}: the fields that change, or `status: REMOVIDA_PELO_USUARIO_RECEBEDOR` alone. */
export const cobPatchBody = z.object({
  calendario: calendario.optional(),
  devedor: devedor.optional(),
  loc: locRef.optional(),
  status: z.literal('REMOVIDA_PELO_USUARIO_RECEBEDOR').optional(),
  valor: valor.partial().optional(),
  chave: z.string().min(1).max(77).optional(),
  solicitacaoPagador: z.string().max(140).optional(),
  infoAdicionais: infoAdicionais.optional(),
});

export const cobGetQuery = z.object({ revisao: z.string().regex(/^\d{1,9}$/, 'deve ser um número inteiro não negativo').transform(Number).optional() });

export const cobListQuery = z.object({
  ...listQueryShape,
  cpf: z.string().regex(/^\d{11}$/, 'deve ter 11 dígitos').optional(),
  cnpj: z.string().regex(/^[0-9A-Z]{14}$/, 'deve ter 14 dígitos ou letras maiúsculas').optional(),
  locationPresente: booleanText.optional(),
  status: z.enum(COB_STATUSES as [string, ...string[]]).optional(),
});

const Cob = z.looseObject({ txid: z.string(), revisao: z.number().int(), status: z.enum(COB_STATUSES as [string, ...string[]]), valor: z.looseObject({ original: z.string() }), chave: z.string() });
const problems = { invalid: 'CobOperacaoInvalida', notFound: 'CobNaoEncontrado', subject: 'cob' };
const readProblems = { invalid: 'CobConsultaInvalida', notFound: 'CobNaoEncontrado', subject: 'cob' };
const common = { 400: { description: 'Requisição inválida', schema: ApiPixProblem, contentType: PROBLEM }, 403: { description: 'Acesso negado', schema: ApiPixProblem, contentType: PROBLEM }, 503: { description: 'Serviço indisponível', schema: ApiPixProblem, contentType: PROBLEM } };

export const cobApi = {
  put: pixRoute({
    method: 'PUT', path: '/cob/:txid', operationId: 'apiPixCobPut', summary: 'Cria uma cobrança imediata com o txid do recebedor', tag: 'API Pix: cob',
    scope: 'cob.write', problems, params: txidParam, body: cobBody,
    responses: { 201: { description: 'Cobrança criada', schema: Cob }, ...common, 404: { description: 'Não encontrada', schema: ApiPixProblem, contentType: PROBLEM } },
  }),
  post: pixRoute({
    method: 'POST', path: '/cob', operationId: 'apiPixCobPost', summary: 'Cria uma cobrança imediata com txid do PSP', tag: 'API Pix: cob',
    scope: 'cob.write', problems, body: cobBody,
    responses: { 201: { description: 'Cobrança criada', schema: Cob }, ...common },
  }),
  patch: pixRoute({
    method: 'PATCH', path: '/cob/:txid', operationId: 'apiPixCobPatch', summary: 'Revisa uma cobrança imediata', tag: 'API Pix: cob',
    scope: 'cob.write', problems, params: txidParam, body: cobPatchBody,
    responses: { 200: { description: 'Cobrança revisada', schema: Cob }, ...common, 404: { description: 'Não encontrada', schema: ApiPixProblem, contentType: PROBLEM } },
  }),
  get: pixRoute({
    method: 'GET', path: '/cob/:txid', operationId: 'apiPixCobGet', summary: 'Consulta uma cobrança imediata', tag: 'API Pix: cob',
    scope: 'cob.read', problems: readProblems, params: txidParam, query: cobGetQuery,
    responses: { 200: { description: 'A cobrança', schema: Cob }, ...common, 404: { description: 'Não encontrada', schema: ApiPixProblem, contentType: PROBLEM } },
  }),
  list: pixRoute({
    method: 'GET', path: '/cob', operationId: 'apiPixCobList', summary: 'Lista cobranças imediatas', tag: 'API Pix: cob',
    scope: 'cob.read', problems: readProblems, query: cobListQuery,
    responses: { 200: { description: 'Cobranças', schema: z.looseObject({ parametros: z.looseObject({}), cobs: z.array(Cob) }) }, ...common },
  }),
};
