import { malformedUrlMessage } from '../../http/errorHandler.js';
import { useJsonBodyParser } from '../../http/jsonBody.js';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { AppContext } from '../../context.js';
import { safeSum } from '../../lib/money.js';
import { BoletoError, boletoErrorHandler, notFound, parseInput, successBody } from '../../http/boletoErrors.js';
import { boletoPipeline, callerOf } from './pipeline.js';
import * as S from '../../boleto/schemas.js';
import { boletoApi as api } from './boleto.api.js';
import { mount } from '../../http/routeSpec.js';
import * as boletos from '../../boleto/service.js';
import * as settlements from '../../boleto/settlement.js';


function send(reply: FastifyReply, request: FastifyRequest, status: number, data: unknown, meta?: Record<string, unknown>) {
  return reply.code(status).send(successBody(request, data, meta));
}

/** The page meta of a list: how many items, and the cursor of the next page (null on the last). */
function pageMeta<T>(items: T[], limit: number, position: (last: T) => number) {
  const last = items.at(-1);
  return { count: items.length, next_cursor: items.length === limit && last !== undefined ? S.encodeCursor(position(last)) : null };
}

/**
 * The boleto central API (spec "Boleto central API"), registered under /api/v1/central. Its own
 * envelope, error handler and not-found answer live in this plugin scope only.
 */
export function boletoRoutes(ctx: AppContext) {
  return async function plugin(app: FastifyInstance) {
    app.setErrorHandler(boletoErrorHandler);
    app.setNotFoundHandler((request) => {
      const malformed = malformedUrlMessage(request);
      if (malformed !== null) throw new BoletoError('VALIDATION_ERROR', malformed);
      throw notFound(`Route ${request.method} ${request.url.split('?')[0]}`);
    });
    // An action POST may come with `Content-Type: application/json` and no body at all.
    useJsonBodyParser(app, { allowEmpty: true });
    app.addHook('onRequest', boletoPipeline(ctx));

    boletoLifecycleRoutes(app, ctx);
    settlementRoutes(app, ctx);
    healthRoute(app, ctx);
  };
}

/** The boletos: create, list, read, change, cancel, pay. */
function boletoLifecycleRoutes(app: FastifyInstance, ctx: AppContext) {
  mount(app, api.create, async (request, reply) => {
    const { boleto } = parseInput(S.createBoleto, request.body);
    const row = await boletos.createBoleto(ctx, callerOf(request), boleto);
    return send(reply, request, 201, boletos.boletoView(row));
  });

  mount(app, api.list, async (request, reply) => {
    const q = parseInput(S.listBoletosQuery, request.query);
    const limit = q.limit ?? S.DEFAULT_PAGE_SIZE;
    const rows = await boletos.listBoletos(ctx, callerOf(request), {
      ...(q.nosso_numero ? { nossoNumeros: q.nosso_numero } : {}),
      ...(q.status ? { status: q.status } : {}),
      ...(q.cursor !== undefined ? { beforeId: q.cursor } : {}),
      limit,
    });
    return send(reply, request, 200, rows.map(boletos.boletoView), pageMeta(rows, limit, (b) => b.id));
  });

  mount(app, api.get, async (request, reply) => {
    const { nosso_numero } = parseInput(S.nossoNumeroParams, request.params);
    return send(reply, request, 200, boletos.boletoView(await boletos.getBoleto(ctx, callerOf(request), nosso_numero)));
  });

  mount(app, api.patch, async (request, reply) => {
    const { nosso_numero } = parseInput(S.nossoNumeroParams, request.params);
    const { boleto } = parseInput(S.patchBoleto, request.body);
    return send(reply, request, 200, boletos.boletoView(await boletos.updateBoleto(ctx, callerOf(request), nosso_numero, boleto)));
  });

  mount(app, api.cancel, async (request, reply) => {
    const { nosso_numero } = parseInput(S.nossoNumeroParams, request.params);
    return send(reply, request, 200, boletos.boletoView(await boletos.cancelBoleto(ctx, callerOf(request), nosso_numero)));
  });

  mount(app, api.pay, async (request, reply) => {
    const { nosso_numero } = parseInput(S.nossoNumeroParams, request.params);
    const body = parseInput(S.payBoleto, request.body);
    const row = await boletos.payBoleto(ctx, callerOf(request), nosso_numero, body?.amount_cents);
    return send(reply, request, 200, boletos.boletoView(row));
  });
}

/** The settlements of paid boletos: list, read one, trigger. */
function settlementRoutes(app: FastifyInstance, ctx: AppContext) {
  mount(app, api.settlements, async (request, reply) => {
    const q = parseInput(S.listSettlementsQuery, request.query);
    const limit = q.limit ?? S.DEFAULT_PAGE_SIZE;
    const rows = await settlements.listSettlements(ctx, callerOf(request), {
      ...(q.cursor !== undefined ? { beforeSeq: q.cursor } : {}),
      limit,
    });
    return send(reply, request, 200, rows.map((s) => settlements.settlementView(s)), pageMeta(rows, limit, (s) => s.seq));
  });

  mount(app, api.settlement, async (request, reply) => {
    const { id } = parseInput(S.settlementParams, request.params);
    const { settlement, nossoNumeros } = await settlements.getSettlement(ctx, callerOf(request), id);
    return send(reply, request, 200, settlements.settlementView(settlement, nossoNumeros));
  });

  mount(app, api.trigger, async (request, reply) => {
    parseInput(S.triggerSettlement, request.body);
    const result = await settlements.triggerSettlement(ctx, callerOf(request));
    const data = {
      settlements: result.settlements.map((s) => settlements.settlementView(s)),
      boleto_count: result.settlements.reduce((n, s) => n + s.boleto_count, 0),
      amount_cents: safeSum(result.settlements.map((s) => s.amount_cents)),
      has_more: result.hasMore,
    };
    return send(reply, request, result.settlements.length > 0 ? 201 : 200, data);
  });
}

/** The central API's health: whether the database answers. */
function healthRoute(app: FastifyInstance, ctx: AppContext) {
  mount(app, api.health, async (request, reply) => {
    try {
      await ctx.db.ping();
    } catch (err) {
      // Never the driver's error text in the answer (it can name hosts and users): the log has it.
      request.log.warn({ err: (err as Error).message }, 'boleto health: database unavailable');
      throw new BoletoError('SERVICE_UNAVAILABLE', 'The database does not answer', { database: 'unavailable' });
    }
    return send(reply, request, 200, { status: 'ok', app_env: ctx.config.appEnv, time: ctx.clock.now().toISOString() });
  });
}
