import type { FastifyInstance } from 'fastify';
import type { AppContext } from '../../context.js';
import { principal, recordAnswer } from '../../external/pipeline.js';
import { parseOrThrow } from '../../http/validation.js';
import { mount } from '../../http/routeSpec.js';
import { cashInBody, pixApi } from '../pix.api.js';
import { CHARGE, createCharge } from './charges.js';

/** POST /pix/cash-in (permission pix:write, signed). */
export async function chargeRoutes(app: FastifyInstance, ctx: AppContext) {
  mount(app, pixApi.cashIn, async (req, reply) => {
    const body = parseOrThrow(cashInBody, req.body);
    const answer = await createCharge(
      ctx,
      principal(req),
      {
        amountCents: body.amount,
        expiresInSeconds: body.expires_in ?? CHARGE.defaultExpiresInSeconds,
        payerName: body.payer_name,
        payerDocument: body.payer_document,
        description: body.description,
        tag: body.tag,
        externalId: body.external_id,
        pixKey: body.pix_key,
      },
      (tx, statusCode, payload) => recordAnswer(req, tx, statusCode, payload),
    );
    return reply.code(answer.statusCode).send(answer.body);
  });
}
