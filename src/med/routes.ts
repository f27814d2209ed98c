import type { FastifyInstance } from 'fastify';
import type { AppContext } from '../context.js';
import { principal, recordAnswer } from '../external/pipeline.js';
import { mount } from '../http/routeSpec.js';
import { parseOrThrow } from '../http/validation.js';
import { defenseBody, medApi } from './med.api.js';
import { getInfraction, listInfractions, submitDefense } from './merchant.js';

export { DEFENSE_LIMITS } from './med.api.js';

type IdParams = { id: string };

/** The defense of a POST /med/:id/defense body (400 with a field map when invalid). */
export function parseDefense(raw: unknown) {
  const body = parseOrThrow(defenseBody, raw);
  return { text: body.text, attachments: body.attachments ?? [] };
}

/** GET /med, GET /med/:id (payment:read) and POST /med/:id/defense (payment:write, signed). */
export async function medRoutes(app: FastifyInstance, ctx: AppContext) {
  mount(app, medApi.list, async (req) => listInfractions(ctx, principal(req).accountId, req.query));
  mount(app, medApi.get, async (req) => getInfraction(ctx, principal(req).accountId, (req.params as IdParams).id));
  mount(app, medApi.defense, async (req, reply) => {
    const answer = await submitDefense(
      ctx,
      principal(req).accountId,
      (req.params as IdParams).id,
      parseDefense(req.body),
      (tx, statusCode, payload) => recordAnswer(req, tx, statusCode, payload),
    );
    return reply.code(201).send(answer);
  });
}
