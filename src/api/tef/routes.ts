import type { FastifyInstance } from 'fastify';
import type { AppContext } from '../../context.js';
import { principal, recordAnswer } from '../../external/pipeline.js';
import * as merchants from '../../merchants/repository.js';
import { mount } from '../../http/routeSpec.js';
import { tefAdminApi, tefApi } from '../../openapi/more.api.js';
import { DomainError, invalidFields } from '../../errors/catalog.js';
import { parseTef, transfer } from '../../tef/tef.js';

/** POST /tef/transfers (transfer:write): a TEF from the key's account (docs/tef.md). */
export async function tefRoutes(app: FastifyInstance, ctx: AppContext) {
  mount(app, tefApi.transfer, async (req, reply) => {
    const command = parseTef(req.body);
    const { merchantId, accountId } = principal(req);
    const answer = await transfer(ctx, { merchantId, accountId }, command, async (tx, answer) => {
      if (!(answer instanceof DomainError)) await recordAnswer(req, tx, answer.statusCode, answer.body);
    });
    return reply.code(answer.statusCode).send(answer.body);
  });
}

/** POST /api/admin/tef/transfers: the same transfer on the operator's behalf, from `from_account_id`. */
export async function tefAdminRoutes(app: FastifyInstance, ctx: AppContext) {
  mount(app, tefAdminApi.transfer, async (req, reply) => {
    const body = req.body;
    if (body === null || typeof body !== 'object' || Array.isArray(body)) throw invalidFields({ body: ['must be a JSON object'] });
    const { from_account_id: from, ...rest } = body as Record<string, unknown>;
    if (typeof from !== 'number' || !Number.isSafeInteger(from) || from <= 0) throw invalidFields({ from_account_id: ['must be a positive integer'] });
    const account = await merchants.findAccount(ctx.db, from);
    if (!account) throw invalidFields({ from_account_id: ['does not exist'] });
    const command = parseTef(rest);
    const answer = await transfer(ctx, { merchantId: account.merchant_id, accountId: account.id }, command, async () => {});
    return reply.code(answer.statusCode).send(answer.body);
  });
}
