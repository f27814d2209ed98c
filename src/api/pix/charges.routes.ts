import type { FastifyInstance } from 'fastify';
import type { AppContext } from '../../context.js';
import { principal, recordAnswer } from '../../external/pipeline.js';
import { badRequest, notFound } from '../../http/errors.js';
import { parseOrThrow } from '../../http/validation.js';
import { mount } from '../../http/routeSpec.js';
import { cashInBody, pixApi } from './pix.api.js';
import { CHARGE, chargeBody, createCharge } from '../../pix/cashin/charges.js';
import { findAccountCharge } from '../../pix/cashin/repository.js';

/** The charge command of a POST /pix/cash-in body (400 with a field map when invalid). */
export function parseChargeCommand(raw: unknown) {
  const body = parseOrThrow(cashInBody, raw);
  return {
    amountCents: body.amount,
    expiresInSeconds: body.expires_in ?? CHARGE.defaultExpiresInSeconds,
    payerName: body.payer_name,
    payerDocument: body.payer_document,
    description: body.description,
    tag: body.tag,
    externalId: body.external_id,
    pixKey: body.pix_key,
  };
}

/** POST /pix/cash-in (permission pix:write, signed). */
export async function chargeRoutes(app: FastifyInstance, ctx: AppContext) {
  mount(app, pixApi.cashIn, async (req, reply) => {
    const answer = await createCharge(
      ctx,
      principal(req),
      parseChargeCommand(req.body),
      (tx, statusCode, payload) => recordAnswer(req, tx, statusCode, payload),
    );
    return reply.code(answer.statusCode).send(answer.body);
  });

  // A charge read again (its BR Code and QR image included), by id, transaction_id, txid or external_id.
  mount(app, pixApi.getCharge, async (req) => {
    const { id } = req.params as { id: string };
    if (id.length === 0 || id.length > 128) throw badRequest('id must be 1 to 128 characters');
    const charge = await findAccountCharge(ctx.db, principal(req).accountId, id);
    if (!charge) throw notFound('charge not found');
    return chargeBody(charge);
  });
}
