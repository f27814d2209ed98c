import type { FastifyInstance } from 'fastify';
import type { AppContext } from '../../context.js';
import { principal, recordAnswer } from '../../external/pipeline.js';
import { mount } from '../../http/routeSpec.js';
import { QueryReader, readPageAndDates } from '../../http/query.js';
import { parseOrThrow } from '../../http/validation.js';
import { END_TO_END_ID } from '../../lib/ids.js';
import { MED_STATUSES } from '../../med/repository.js';
import { defenseBody, medApi } from './med.api.js';
import { getInfraction, listInfractions, submitDefense, type InfractionListQuery } from '../../med/merchant.js';

export { DEFENSE_LIMITS } from './med.api.js';

type IdParams = { id: string };

/** The defense of a POST /med/:id/defense body (400 with a field map when invalid). */
export function parseDefense(raw: unknown) {
  const body = parseOrThrow(defenseBody, raw);
  return { text: body.text, attachments: body.attachments ?? [] };
}

/** The query of GET /med: status, end_to_end_id, date_from, date_to, page, per_page (400 with a field map when invalid). */
export function parseInfractionQuery(query: unknown): InfractionListQuery {
  const r = new QueryReader(query);
  const { page, perPage, from, before } = readPageAndDates(r);
  const status = r.oneOf('status', MED_STATUSES);
  const endToEndId = r.string('end_to_end_id', END_TO_END_ID, 'must be an end-to-end id (E + ISPB + date + 11 characters)');
  r.done();
  return { page, perPage, from, before, status, endToEndId };
}

/** GET /med, GET /med/:id (payment:read) and POST /med/:id/defense (payment:write, signed). */
export async function medRoutes(app: FastifyInstance, ctx: AppContext) {
  mount(app, medApi.list, async (req) => listInfractions(ctx, principal(req).accountId, parseInfractionQuery(req.query)));
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
