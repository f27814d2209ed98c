import type { FastifyInstance } from 'fastify';
import type { AppContext } from '../../context.js';
import { keyBinding, principal } from '../../external/pipeline.js';
import { getRefund, refund } from '../../pix/refund.js';
import { parseRefund } from '../../pix/refundRequest.js';
import { mount } from '../../http/routeSpec.js';
import { pixApi } from './pix.api.js';

/** POST /pix/refund (payment:write) and GET /pix/refund/:id (transfer:read). */
export async function refundRoutes(app: FastifyInstance, ctx: AppContext) {
  mount(app, pixApi.refund, async (req, reply) => {
    const request = parseRefund(req.body);
    const answer = await refund(ctx, principal(req).merchantId, request, keyBinding(req));
    return reply.code(answer.statusCode).send(answer.body);
  });

  mount(app, pixApi.getRefund, async (req) => getRefund(ctx, principal(req).merchantId, (req.params as { id: string }).id));
}
