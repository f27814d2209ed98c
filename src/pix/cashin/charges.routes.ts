import { MAX_AMOUNT_CENTS } from '../../lib/money.js';
import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import type { AppContext } from '../../context.js';
import { principal, recordAnswer } from '../../external/pipeline.js';
import { badRequest, notFound } from '../../http/errors.js';
import { parseOrThrow } from '../../http/validation.js';
import { isValidDocument } from '../../lib/documents.js';
import { EXTERNAL_ID, EXTERNAL_ID_MESSAGE } from '../externalId.js';
import { CHARGE, chargeBody, createCharge } from './charges.js';
import { findAccountCharge } from './repository.js';

/** `external_id` and `tag`: the spec's external_id rule. */
const identifier = z.string().trim().regex(EXTERNAL_ID, EXTERNAL_ID_MESSAGE);

/** CPF or CNPJ, digits with or without the usual punctuation; kept as digits. */
const document = z
  .string()
  .transform((s) => s.trim().replace(/[.\-/\s]/g, ''))
  .refine(isValidDocument, 'must be a valid CPF (11 digits) or CNPJ (14 digits)');

/** Optional fields accept null as "not sent". */
const optional = <T extends z.ZodType>(schema: T) => schema.nullish().transform((v) => v ?? undefined);

const cashInBody = z.strictObject({
  amount: z.number().int().min(1).max(Math.min(CHARGE.maxAmountCents, MAX_AMOUNT_CENTS)),
  expires_in: optional(z.number().int().min(CHARGE.minExpiresInSeconds).max(CHARGE.maxExpiresInSeconds)),
  payer_name: optional(z.string().trim().min(1).max(100)),
  payer_document: optional(document),
  description: optional(z.string().trim().max(140)),
  tag: optional(identifier),
  external_id: optional(identifier),
  pix_key: optional(z.string().trim().min(1).max(77)),
});

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
  app.post('/pix/cash-in', { config: { permission: 'pix:write' } }, async (req, reply) => {
    const answer = await createCharge(
      ctx,
      principal(req),
      parseChargeCommand(req.body),
      (tx, statusCode, payload) => recordAnswer(req, tx, statusCode, payload),
    );
    return reply.code(answer.statusCode).send(answer.body);
  });

  // A charge read again (its BR Code and QR image included), by id, transaction_id, txid or external_id.
  app.get<{ Params: { id: string } }>('/pix/cash-in/:id', { config: { permission: 'pix:read' } }, async (req) => {
    const id = req.params.id;
    if (id.length === 0 || id.length > 128) throw badRequest('id must be 1 to 128 characters');
    const charge = await findAccountCharge(ctx.db, principal(req).accountId, id);
    if (!charge) throw notFound('charge not found');
    return chargeBody(charge);
  });
}
