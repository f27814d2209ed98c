import { z } from 'zod';
import { booleanText, listQueryShape } from './listQuery.js';
import { ApiPixProblem, pixRoute } from './spec.js';

const PROBLEM = 'application/problem+json';

/** The `loc` operations (payload locations): docs/api-pix.md, "loc". */
export const locBody = z.object({ tipoCob: z.enum(['cob', 'cobv']) });
export const locIdParam = z.object({ id: z.string().regex(/^[1-9]\d{0,14}$/).transform(Number) });
export const locListQuery = z.object({ ...listQueryShape, txIdPresente: booleanText.optional(), tipoCob: z.enum(['cob', 'cobv']).optional() });

const Location = z.looseObject({ id: z.number().int(), location: z.string(), tipoCob: z.enum(['cob', 'cobv']), criacao: z.string(), txid: z.string().optional() });
const common = { 403: { description: 'Acesso negado', schema: ApiPixProblem, contentType: PROBLEM }, 503: { description: 'Serviço indisponível', schema: ApiPixProblem, contentType: PROBLEM } };
const write = { invalid: 'PayloadLocationOperacaoInvalida', notFound: 'PayloadLocationNaoEncontrado' };
const read = { invalid: 'PayloadLocationConsultaInvalida', notFound: 'PayloadLocationNaoEncontrado' };

export const locApi = {
  create: pixRoute({
    method: 'POST', path: '/loc', operationId: 'apiPixLocPost', summary: 'Cria uma location de payload', tag: 'API Pix: loc',
    scope: 'payloadlocation.write', problems: write, body: locBody,
    responses: { 201: { description: 'Location criada', schema: Location }, 400: { description: 'Requisição inválida', schema: ApiPixProblem, contentType: PROBLEM }, ...common },
  }),
  list: pixRoute({
    method: 'GET', path: '/loc', operationId: 'apiPixLocList', summary: 'Lista locations', tag: 'API Pix: loc',
    scope: 'payloadlocation.read', problems: read, query: locListQuery,
    responses: { 200: { description: 'Locations', schema: z.looseObject({ parametros: z.looseObject({}), loc: z.array(Location) }) }, 400: { description: 'Consulta inválida', schema: ApiPixProblem, contentType: PROBLEM }, ...common },
  }),
  get: pixRoute({
    method: 'GET', path: '/loc/:id', operationId: 'apiPixLocGet', summary: 'Consulta uma location', tag: 'API Pix: loc',
    scope: 'payloadlocation.read', problems: read, params: locIdParam,
    responses: { 200: { description: 'A location', schema: Location }, 404: { description: 'Não encontrada', schema: ApiPixProblem, contentType: PROBLEM }, ...common },
  }),
  unlink: pixRoute({
    method: 'DELETE', path: '/loc/:id/txid', operationId: 'apiPixLocUnlink', summary: 'Desvincula a cobrança de uma location', tag: 'API Pix: loc',
    scope: 'payloadlocation.write', problems: write, params: locIdParam,
    responses: { 200: { description: 'A location, sem cobrança', schema: Location }, 404: { description: 'Não encontrada', schema: ApiPixProblem, contentType: PROBLEM }, ...common },
  }),
};
