import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { AppContext } from '../../context.js';
import { DomainError } from '../../errors/catalog.js';
import { pixProblem, type Violation } from '../../http/apiPixProblems.js';
import { ERROR_STATUS } from '../../http/errorMap.js';
import { mount } from '../../http/routeSpec.js';
import { getReceivedPix, listReceivedPix, parsePixQuery, type PixQuery } from '../../apiPix/pixReceived.js';
import { getReturn, parseReturnRequest, requestReturn } from '../../apiPix/pixReturns.js';
import { deletePixWebhook, getPixWebhook, listPixWebhooks, parseWebhookQuery, putPixWebhook } from '../../apiPix/pixWebhooks.js';
import { pixCaller } from './bearer.js';
import { pixRoute } from './spec.js';

/**
 * The standard's received Pix, returns and webhooks under /api/pix/v2 (docs/api-pix.md, "Received
 * Pix, returns and webhooks"): each handler reads the caller and calls one function of
 * src/apiPix/; the refusals those raise already name the standard's type and violations.
 */
export const pixApi = {
  listPix: pixRoute({
    method: 'GET',
    path: '/pix',
    operationId: 'apiPixListPix',
    summary: 'Pix recebidos (inicio, fim, txid, txIdPresente, devolucaoPresente, cpf/cnpj, paginacao)',
    tag: 'API Pix: Pix',
    scope: 'pix.read',
    problems: { invalid: 'PixConsultaInvalida' },
    responses: { 200: { description: 'Página de Pix recebidos' } },
  }),
  getPix: pixRoute({
    method: 'GET',
    path: '/pix/:e2eid',
    operationId: 'apiPixGetPix',
    summary: 'Um Pix recebido, com suas devoluções',
    tag: 'API Pix: Pix',
    scope: 'pix.read',
    problems: { invalid: 'RequisicaoInvalida', notFound: 'PixNaoEncontrado' },
    responses: { 200: { description: 'O Pix' } },
  }),
  putReturn: pixRoute({
    method: 'PUT',
    path: '/pix/:e2eid/devolucao/:id',
    operationId: 'apiPixPutReturn',
    summary: 'Solicita uma devolução (id do cliente, idempotente)',
    tag: 'API Pix: Pix',
    scope: 'pix.write',
    problems: { invalid: 'PixDevolucaoInvalida', notFound: 'NaoEncontrado', subject: 'devolucao' },
    responses: { 201: { description: 'A devolução' } },
  }),
  getReturn: pixRoute({
    method: 'GET',
    path: '/pix/:e2eid/devolucao/:id',
    operationId: 'apiPixGetReturn',
    summary: 'Uma devolução',
    tag: 'API Pix: Pix',
    scope: 'pix.read',
    problems: { invalid: 'RequisicaoInvalida', notFound: 'PixDevolucaoNaoEncontrada' },
    responses: { 200: { description: 'A devolução' } },
  }),
  putWebhook: pixRoute({
    method: 'PUT',
    path: '/webhook/:chave',
    operationId: 'apiPixPutWebhook',
    summary: 'Configura o webhook Pix de uma chave ({webhookUrl}/pix)',
    tag: 'API Pix: Webhook',
    scope: 'webhook.write',
    problems: { invalid: 'WebhookOperacaoInvalida', subject: 'webhook' },
    responses: { 200: { description: 'Webhook configurado' } },
  }),
  getWebhook: pixRoute({
    method: 'GET',
    path: '/webhook/:chave',
    operationId: 'apiPixGetWebhook',
    summary: 'O webhook de uma chave',
    tag: 'API Pix: Webhook',
    scope: 'webhook.read',
    problems: { invalid: 'RequisicaoInvalida', notFound: 'WebhookNaoEncontrado' },
    responses: { 200: { description: 'O webhook' } },
  }),
  deleteWebhook: pixRoute({
    method: 'DELETE',
    path: '/webhook/:chave',
    operationId: 'apiPixDeleteWebhook',
    summary: 'Cancela o webhook de uma chave',
    tag: 'API Pix: Webhook',
    scope: 'webhook.write',
    problems: { invalid: 'RequisicaoInvalida', notFound: 'WebhookNaoEncontrado' },
    responses: { 204: { description: 'Webhook cancelado' } },
  }),
  listWebhooks: pixRoute({
    method: 'GET',
    path: '/webhook',
    operationId: 'apiPixListWebhooks',
    summary: 'Webhooks configurados',
    tag: 'API Pix: Webhook',
    scope: 'webhook.read',
    problems: { invalid: 'WebhookConsultaInvalida' },
    responses: { 200: { description: 'Os webhooks' } },
  }),
};

/** A refusal of src/apiPix/ that names the standard's type (pixProblems.ts) as that problem; others as they are. */
async function standard<T>(run: () => Promise<T> | T): Promise<T> {
  try {
    return await run();
  } catch (err) {
    const tipo = err instanceof DomainError ? err.extra?.apiPixType : undefined;
    if (!(err instanceof DomainError) || typeof tipo !== 'string') throw err;
    const status = ERROR_STATUS[err.code] === 404 ? 404 : 400;
    throw pixProblem(status, tipo, err.detail, { violacoes: (err.extra?.violacoes as Violation[] | undefined) ?? [] });
  }
}

const scopeOf = (req: FastifyRequest) => {
  const c = pixCaller(req);
  return { merchantId: c.merchantId, accountId: c.accountId };
};
const params = (req: FastifyRequest) => req.params as Record<string, string>;

export async function pixRoutes(app: FastifyInstance, ctx: AppContext) {
  mount(app, pixApi.listPix, async (req) => standard(() => listReceivedPix(ctx.db, scopeOf(req), parsePixQuery(req.query as PixQuery))));
  mount(app, pixApi.getPix, async (req) => standard(() => getReceivedPix(ctx.db, scopeOf(req), params(req).e2eid!)));
  mount(app, pixApi.putReturn, async (req, reply) => {
    const answer = await standard(() => requestReturn(ctx, scopeOf(req), params(req).e2eid!, params(req).id!, parseReturnRequest(req.body)));
    return reply.code(answer.statusCode).send(answer.body);
  });
  mount(app, pixApi.getReturn, async (req) => standard(() => getReturn(ctx, scopeOf(req), params(req).e2eid!, params(req).id!)));

  mount(app, pixApi.putWebhook, async (req, reply) => {
    const c = pixCaller(req);
    await standard(() => putPixWebhook(ctx, { merchantId: c.merchantId, accountId: c.accountId, clientId: c.clientId }, params(req).chave!, req.body));
    // The standard's 200 carries no body; GET /webhook/{chave} shows the webhook.
    return reply.code(200).send();
  });
  mount(app, pixApi.getWebhook, async (req) => standard(() => getPixWebhook(ctx, scopeOf(req), params(req).chave!)));
  mount(app, pixApi.deleteWebhook, async (req, reply) => {
    await standard(() => deletePixWebhook(ctx, scopeOf(req), params(req).chave!));
    return reply.code(204).send();
  });
  mount(app, pixApi.listWebhooks, async (req) => standard(() => listPixWebhooks(ctx, scopeOf(req), parseWebhookQuery(req.query as PixQuery))));
}
