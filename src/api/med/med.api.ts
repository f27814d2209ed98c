import { z } from 'zod';
import { baseUnits, int, named, timestamp } from '../../http/apiSchemas.js';
import { pageAndDatesQuery, readerParam } from '../../http/listParams.js';
import { defineRoutes } from '../../http/routeSpec.js';
import { END_TO_END_ID } from '../../lib/ids.js';
import { MED_STATUSES } from '../../med/repository.js';

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

export const defenseBody = z.strictObject({
  text: z.string().trim().min(1).max(DEFENSE_LIMITS.textMax),
  attachments: z.array(attachment).max(DEFENSE_LIMITS.attachmentsMax).optional(),
});

export const medListQuery = z.object({
  ...pageAndDatesQuery,
  status: readerParam(z.enum(MED_STATUSES), 'Infraction status filter (empty = none)'),
  end_to_end_id: readerParam(z.string().regex(END_TO_END_ID), 'The end-to-end id of the disputed PIX (empty = any)'),
});

const medFields = {
  id: z.string(),
  status: z.enum(MED_STATUSES),
  reason: z.string(),
  account_id: int,
  transaction_id: z.string(),
  end_to_end_id: z.string(),
  original_amount: baseUnits,
  amount: baseUnits,
  blocked_amount: baseUnits,
  refunded_amount: baseUnits,
  released_amount: baseUnits,
  payer: z.object({ name: z.string().nullable(), document: z.string().nullable(), ispb: z.string().nullable(), bank_name: z.string().nullable() }),
  decision: z.string().nullable(),
  refund: z.object({
    status: z.enum(['requested', 'processing', 'settled', 'released', 'failed']).nullable(),
    transaction_id: z.string().nullable(),
    end_to_end_id: z.string().nullable(),
    amount: baseUnits.nullable(),
    completed_at: timestamp.nullable(),
  }),
  defense: z
    .object({
      text: z.string().nullable(),
      attachments: z.array(z.object({ name: z.string().optional(), url: z.string().optional(), text: z.string().optional() })),
      submitted_at: timestamp.nullable(),
    })
    .nullable(),
  defense_deadline: timestamp.nullable(),
  created_at: timestamp.nullable(),
  updated_at: timestamp.nullable(),
  resolved_at: timestamp.nullable(),
};
/** The MED record as the merchant and the sandbox see it (src/med/merchant.ts medRecord). */
export const MedRecord = named('MedRecord', z.object(medFields));
const MedResponse = named('MedResponse', z.object({ worked: z.literal(true), ...medFields }));
const MedList = named('MedList', z.object({ worked: z.literal(true), data: z.array(MedRecord), page: int, per_page: int }));

const idNotUuid = { description: 'id is not a UUID; malformed parameters' };

export const medApi = defineRoutes({
  list: {
    method: 'GET',
    path: '/med',
    operationId: 'listInfractions',
    tag: 'MED',
    summary: 'MED infractions against the account, newest first',
    permission: 'payment:read',
    query: medListQuery,
    responses: { 200: { description: 'One page of infractions', schema: MedList } },
  },
  get: {
    method: 'GET',
    path: '/med/:id',
    operationId: 'getInfraction',
    tag: 'MED',
    summary: 'One MED infraction',
    permission: 'payment:read',
    params: z.object({ id: z.string().describe('The infraction id (UUID)') }),
    responses: { 200: { description: 'The infraction', schema: MedResponse }, 400: idNotUuid, 404: { description: 'Infraction not found' } },
  },
  defense: {
    method: 'POST',
    path: '/med/:id/defense',
    operationId: 'submitDefense',
    tag: 'MED',
    summary: 'Submit the defense of an OPEN infraction before its deadline',
    permission: 'payment:write',
    signed: true,
    params: z.object({ id: z.string().describe('The infraction id (UUID)') }),
    body: defenseBody,
    bodyExample: { text: 'The goods were delivered on 2026-01-10.', attachments: [{ name: 'delivery', url: 'https://example.com/delivery.pdf' }] },
    responses: {
      201: { description: 'The defense is stored', schema: MedResponse },
      400: idNotUuid,
      404: { description: 'Infraction not found' },
      422: { description: 'A defense was already submitted, the infraction is closed, or the deadline passed' },
    },
  },
});
