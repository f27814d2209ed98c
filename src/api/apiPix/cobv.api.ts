import { z } from 'zod';
import { DECIMAL_AMOUNT } from '../../apiPix/amount.js';
import { COBV_STATUSES } from '../../apiPix/cobv/store.js';
import { isCalendarDate } from '../../lib/businessDays.js';
import { pixCnpj, pixCpf } from './documentFields.js';
import { booleanText, listQueryShape } from './listQuery.js';
import { pixRoute } from './spec.js';

/**
 * The `cobv` operations (due-date charges) and the shapes pixgate accepts for them, written in
 * pixgate's words after the standard's rules: docs/api-pix.md, "cobv". Objects are read leniently
 * (fields the standard does not define are ignored), as the standard's schemas allow.
 */
const decimal = z.string().regex(DECIMAL_AMOUNT, 'deve ser um valor decimal com duas casas, como 10.50 (até 9999999999.99)');
const date = z.string().refine(isCalendarDate, 'deve ser uma data AAAA-MM-DD');
export const txidParam = z.object({ txid: z.string().regex(/^[A-Za-z0-9]{26,35}$/, 'deve ter de 26 a 35 letras ou dígitos') });

const cpf = pixCpf;
const cnpj = pixCnpj;
const address = {
  email: z.string().max(200).optional(),
  logradouro: z.string().max(200).optional(),
  cidade: z.string().max(200).optional(),
  uf: z.string().max(2).optional(),
  cep: z.string().max(8).optional(),
};
const devedor = z.union([
  z.object({ cpf, nome: z.string().min(1).max(200), ...address }),
  z.object({ cnpj, nome: z.string().min(1).max(200), ...address }),
]);
const calendario = z.object({
  dataDeVencimento: date,
  validadeAposVencimento: z.number().int().min(0, 'não pode ser negativa').max(2_147_483_647).optional(),
});
const infoAdicionais = z.array(z.object({ nome: z.string().max(50), valor: z.string().max(200) })).max(50);
const modal = (max: number) => z.object({ modalidade: z.number().int().min(1).max(max), valorPerc: decimal });
const desconto = z.object({
  modalidade: z.number().int().min(1).max(6),
  descontoDataFixa: z.array(z.object({ data: date, valorPerc: decimal })).min(1).max(3).optional(),
  valorPerc: decimal.optional(),
});
const valor = z.object({
  original: decimal,
  multa: modal(2).optional(),
  juros: modal(8).optional(),
  abatimento: modal(2).optional(),
  desconto: desconto.optional(),
});
const loc = z.object({ id: z.number().int().min(1).max(Number.MAX_SAFE_INTEGER) });

/** PUT /cobv/{txid} (and each item of a lotecobv): a whole due-date charge. */
export const cobvBody = z.object({
  calendario,
  devedor,
  loc: loc.optional(),
  valor,
  chave: z.string().min(1).max(77),
  solicitacaoPagador: z.string().max(140).optional(),
  infoAdicionais: infoAdicionais.optional(),
});

/** PATCH /cobv/{txid}: the fields that change, or `status: REMOVIDA_PELO_USUARIO_RECEBEDOR` alone. */
export const cobvPatchBody = z.object({
  calendario: calendario.partial().optional(),
  devedor: devedor.optional(),
  loc: loc.optional(),
  status: z.literal('REMOVIDA_PELO_USUARIO_RECEBEDOR').optional(),
  valor: valor.partial().optional(),
  chave: z.string().min(1).max(77).optional(),
  solicitacaoPagador: z.string().max(140).optional(),
  infoAdicionais: infoAdicionais.optional(),
});

export const cobvGetQuery = z.object({ revisao: z.string().regex(/^\d{1,9}$/, 'deve ser um número inteiro não negativo').transform(Number).optional() });

export const cobvListQuery = z.object({
  ...listQueryShape,
  cpf: z.string().regex(/^\d{11}$/, 'deve ter 11 dígitos').optional(),
  cnpj: z.string().regex(/^[0-9A-Z]{14}$/, 'deve ter 14 dígitos ou letras maiúsculas').optional(),
  locationPresente: booleanText.optional(),
  status: z.enum(COBV_STATUSES as [string, ...string[]]).optional(),
  loteCobVId: z.string().regex(/^\d{1,10}$/, 'deve ser um número inteiro não negativo').transform(Number).optional(),
});

const CobV = z.looseObject({
  calendario: z.looseObject({ dataDeVencimento: z.string(), validadeAposVencimento: z.number().int() }),
  txid: z.string(),
  revisao: z.number().int(),
  status: z.enum(COBV_STATUSES as [string, ...string[]]),
  valor: z.looseObject({ original: z.string() }),
  chave: z.string(),
});
const Problem = z.looseObject({ type: z.string(), title: z.string(), status: z.number().int(), detail: z.string().optional() });
const problems = { invalid: 'CobVOperacaoInvalida', notFound: 'CobVNaoEncontrada', subject: 'cobv' };
const readProblems = { invalid: 'CobVConsultaInvalida', notFound: 'CobVNaoEncontrada', subject: 'cobv' };
const common = { 400: { description: 'Requisição inválida', schema: Problem }, 403: { description: 'Acesso negado', schema: Problem }, 503: { description: 'Serviço indisponível', schema: Problem } };
const tag = 'API Pix: cobv';

export const cobvApi = {
  put: pixRoute({
    method: 'PUT', path: '/cobv/:txid', operationId: 'apiPixCobvPut', summary: 'Cria (ou substitui, se ATIVA) uma cobrança com vencimento', tag,
    scope: 'cobv.write', problems, params: txidParam, body: cobvBody,
    responses: { 201: { description: 'Cobrança com vencimento criada', schema: CobV }, ...common, 404: { description: 'Não encontrada', schema: Problem } },
  }),
  patch: pixRoute({
    method: 'PATCH', path: '/cobv/:txid', operationId: 'apiPixCobvPatch', summary: 'Revisa uma cobrança com vencimento', tag,
    scope: 'cobv.write', problems, params: txidParam, body: cobvPatchBody,
    responses: { 200: { description: 'Cobrança revisada', schema: CobV }, ...common, 404: { description: 'Não encontrada', schema: Problem } },
  }),
  get: pixRoute({
    method: 'GET', path: '/cobv/:txid', operationId: 'apiPixCobvGet', summary: 'Consulta uma cobrança com vencimento', tag,
    scope: 'cobv.read', problems: readProblems, params: txidParam, query: cobvGetQuery,
    responses: { 200: { description: 'A cobrança com vencimento', schema: CobV }, ...common, 404: { description: 'Não encontrada', schema: Problem } },
  }),
  list: pixRoute({
    method: 'GET', path: '/cobv', operationId: 'apiPixCobvList', summary: 'Lista cobranças com vencimento', tag,
    scope: 'cobv.read', problems: readProblems, query: cobvListQuery,
    responses: { 200: { description: 'Cobranças com vencimento', schema: z.looseObject({ parametros: z.looseObject({}), cobs: z.array(CobV) }) }, ...common },
  }),
};
