import type { FastifyInstance } from 'fastify';
import type { AppContext } from '../../context.js';
import { keyBinding, principal } from '../../external/pipeline.js';
import { cashOut } from '../../pix/cashOut.js';
import { parseCashOut } from '../../pix/cashOutCommand.js';
import { mount } from '../../http/routeSpec.js';
import { pixApi } from './pix.api.js';

/** POST /pix/cash-out (transfer:write). */
export async function cashOutRoutes(app: FastifyInstance, ctx: AppContext) {
  mount(app, pixApi.cashOut, async (req, reply) => {
    const command = parseCashOut(req.body);
    const { merchantId, accountId } = principal(req);
    const answer = await cashOut(ctx, { merchantId, accountId }, command, keyBinding(req));
    return reply.code(answer.statusCode).send(answer.body);
  });
}
