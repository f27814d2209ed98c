import { z } from 'zod';

/**
 * Schemas shared by every API's declarations (src/http/routeSpec.ts): the error shapes of
 * src/http/errors.ts as named components, and small pieces of answers. A schema given an `id` here
 * becomes one `#/components/schemas/<id>` of the OpenAPI document and is referenced by every route
 * that uses it.
 */
export const components = z.registry<{ id: string; description?: string }>();
/** The same entries, in declaration order (a zod registry cannot be iterated). */
export const namedSchemas: Array<[z.ZodType, { id: string; description?: string }]> = [];

export function named<T extends z.ZodType>(id: string, schema: T, description?: string): T {
  const meta = { id, ...(description ? { description } : {}) };
  components.add(schema, meta);
  namedSchemas.push([schema, meta]);
  return schema;
}

/** Integer (safe range, as every amount and id of pixgate). */
export const int = z.number().int().min(Number.MIN_SAFE_INTEGER).max(Number.MAX_SAFE_INTEGER);
export const nonNegative = z.number().int().min(0).max(Number.MAX_SAFE_INTEGER);
/** An amount in base units (1 cent = 100 base units), as every answer of the merchant API states money. */
export const baseUnits = nonNegative.describe('Amount in base units: 1 cent = 100 base units');
/** An instant, ISO 8601 in UTC. */
export const timestamp = z.string().describe('ISO 8601 timestamp, UTC');
export const FieldMapSchema = named('FieldMap', z.record(z.string(), z.array(z.string())), 'Field name → messages about it');

/** Shape 1: the request pipeline's errors (content type, API key, IP whitelist, idempotency, rate limit). */
export const PipelineError = named(
  'PipelineError',
  z.object({ error: z.looseObject({ status: z.number().int(), message: z.string(), hint: z.string().optional() }) }),
  'Errors of the request pipeline: content type, credentials, IP whitelist, idempotency, rate limit',
);

/** Shape 2: a key without the route's permission. */
export const PermissionError = named(
  'PermissionError',
  z.object({ error: z.literal('forbidden'), message: z.string() }),
  'The API key lacks the permission the route requires',
);

/** Shape 3: signature validation (and the webhook destination refusals). */
export const WorkedFalseError = named(
  'WorkedFalseError',
  z.object({ worked: z.literal(false), detail: z.string() }),
  'Signature validation errors (HMAC v1/v2) and webhook destination refusals',
);

/** Shape 4: business errors, `{errors: {<atom>: message | field map | messages}}`. */
export const BusinessError = named(
  'BusinessError',
  z.looseObject({
    worked: z.literal(false).optional(),
    errors: z.record(z.string(), z.union([z.string(), z.array(z.string()), FieldMapSchema])),
  }),
  'Business errors: one atom (bad_request, not_found, conflict, unprocessable_entity, …) naming a message, a list of messages or a field map',
);

/** Errors of POST /pix/cash-out: the business shape plus `code` and `detail`. */
export const CashOutError = named(
  'CashOutError',
  z.object({
    worked: z.literal(false),
    errors: z.record(z.string(), z.union([z.string(), FieldMapSchema])),
    code: z.string(),
    detail: z.string(),
  }),
  'Cash-out errors: `code` is one of the catalog codes (docs/pix.md), `errors.<code>` its message, `detail` the specific explanation',
);
