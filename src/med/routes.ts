import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import type { AppContext } from '../context.js';
import { principal, recordAnswer } from '../external/pipeline.js';
import { parseOrThrow } from '../http/validation.js';
import { getInfraction, listInfractions, submitDefense } from './merchant.js';

export const DEFENSE_LIMITS = { textMax: 5000, attachmentsMax: 10, attachmentTextMax: 10_000, urlMax: 2048, nameMax: 140 } as const;

const httpUrl = z
  .string()
  .trim()
  .max(DEFENSE_LIMITS.urlMax)
  .refine((s) => {
    try {
      const u = new URL(s);
      return (u.protocol === 'https:' || u.protocol === 'http:') && u.hostname !== '';
    } catch {
      return false;
    }
  }, 'must be an http or https URL');

/** An attachment is a link to a document or a piece of text (a transcript, a delivery record), optionally named. */
const attachment = z
  .strictObject({
    name: z.string().trim().min(1).max(DEFENSE_LIMITS.nameMax).optional(),
    url: httpUrl.optional(),
    text: z.string().trim().min(1).max(DEFENSE_LIMITS.attachmentTextMax).optional(),
  })
  .refine((a) => (a.url === undefined) !== (a.text === undefined), 'must have exactly one of url or text');

const defenseBody = z.strictObject({
  text: z.string().trim().min(1).max(DEFENSE_LIMITS.textMax),
  attachments: z.array(attachment).max(DEFENSE_LIMITS.attachmentsMax).optional(),
});

type IdParams = { Params: { id: string } };

/** The defense of a POST /med/:id/defense body (400 with a field map when invalid). */
export function parseDefense(raw: unknown) {
  const body = parseOrThrow(defenseBody, raw);
  return { text: body.text, attachments: body.attachments ?? [] };
}

/** GET /med, GET /med/:id (payment:read) and POST /med/:id/defense (payment:write, signed). */
export async function medRoutes(app: FastifyInstance, ctx: AppContext) {
  const read = { config: { permission: 'payment:read' as const } };
  app.get('/med', read, async (req) => listInfractions(ctx, principal(req).accountId, req.query));
  app.get<IdParams>('/med/:id', read, async (req) => getInfraction(ctx, principal(req).accountId, req.params.id));
  app.post<IdParams>('/med/:id/defense', { config: { permission: 'payment:write' } }, async (req, reply) => {
    const answer = await submitDefense(
      ctx,
      principal(req).accountId,
      req.params.id,
      parseDefense(req.body),
      (tx, statusCode, payload) => recordAnswer(req, tx, statusCode, payload),
    );
    return reply.code(201).send(answer);
  });
}
