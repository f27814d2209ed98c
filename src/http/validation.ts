import { z } from 'zod';
import { fieldMap } from '../errors/fields.js';
import { MAX_AMOUNT_CENTS } from '../lib/money.js';
import { badRequest } from './errors.js';

export { fieldMap } from '../errors/fields.js';

/** Parses `input` with `schema` or throws the 400 business error with a field map. */
export function parseOrThrow<S extends z.ZodType>(schema: S, input: unknown, options: { worked?: boolean } = {}): z.output<S> {
  const result = schema.safeParse(input);
  if (!result.success) throw badRequest(fieldMap(result.error, input), options);
  return result.data;
}

/**
 * Integer cents, > 0, at most MAX_AMOUNT_CENTS (R$ 1 billion, the per-operation maximum of every
 * amount in every API). Integer-ness is decided from the JSON text: `100.0` and `1e2` arrive as
 * JsonDecimal and are refused with "must be an integer".
 */
export const cents = z.number().int().min(1).max(MAX_AMOUNT_CENTS);

/** ISO 8601 timestamp with an explicit zone (`Z` or ±hh:mm). */
const ISO_TIMESTAMP = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d{1,6})?)?(Z|[+-]\d{2}:\d{2})$/;
export const isoTimestamp = z
  .string()
  .refine((s) => ISO_TIMESTAMP.test(s) && !Number.isNaN(Date.parse(s)), 'must be an ISO 8601 timestamp with a time zone');
