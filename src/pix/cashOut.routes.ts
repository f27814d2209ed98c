import type { FastifyInstance } from 'fastify';
import type { AppContext } from '../context.js';
import { keyBinding, principal } from '../external/pipeline.js';
import { cashOut } from './cashOut.js';
import { parseCashOut } from './cashOutCommand.js';

/** POST /pix/cash-out (transfer:write). */
export async function cashOutRoutes(app: FastifyInstance, ctx: AppContext) {
  app.post('/pix/cash-out', { config: { permission: 'transfer:write' } }, async (req, reply) => {
    const command = parseCashOut(req.body);
    const { merchantId, accountId } = principal(req);
    const answer = await cashOut(ctx, { merchantId, accountId }, command, keyBinding(req));
    return reply.code(answer.statusCode).send(answer.body);
  });
}
