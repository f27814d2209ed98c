import type { FastifyInstance } from 'fastify';
import type { AppContext } from '../context.js';
import { keyBinding, principal } from '../external/pipeline.js';
import { getRefund, refund } from './refund.js';
import { parseRefund } from './refundRequest.js';

/** POST /pix/refund (payment:write) and GET /pix/refund/:id (transfer:read). */
export async function refundRoutes(app: FastifyInstance, ctx: AppContext) {
  app.post('/pix/refund', { config: { permission: 'payment:write' } }, async (req, reply) => {
    const request = parseRefund(req.body);
    const answer = await refund(ctx, principal(req).merchantId, request, keyBinding(req));
    return reply.code(answer.statusCode).send(answer.body);
  });

  app.get<{ Params: { id: string } }>('/pix/refund/:id', { config: { permission: 'transfer:read' } }, async (req) =>
    getRefund(ctx, principal(req).merchantId, req.params.id),
  );
}
