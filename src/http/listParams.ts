import { z } from 'zod';
import { PER_PAGE_MAX } from './query.js';

/**
 * A query parameter read by src/http/query.ts (QueryReader), which takes an empty value for an
 * absent one: the document states `schema` or the empty string (the HTTP fuzzer sent
 * `?status=` and got the 200 the document did not allow).
 */
export function readerParam<S extends z.ZodType>(schema: S, description: string) {
  return z.union([schema, z.literal('')]).optional().describe(description);
}

/**
 * A whole-number query parameter from `min` to `max`, written in plain decimal digits — the rule
 * and messages of `QueryReader.int` (src/http/query.ts), for routes that validate their query
 * with a zod schema; the document states a string of digits. `z.coerce.number()` also took `1.0`,
 * `1e1`, ` 1` or `0x10` while the document said integer (the HTTP fuzzer:
 * `GET /api/admin/audit-log?limit=1.0` → 200).
 */
export function queryInt(min: number, max: number) {
  return z
    .string()
    .regex(/^\d{1,16}$/, 'must be an integer')
    .transform(Number)
    .pipe(z.number().min(min, `must be greater than or equal to ${min}`).max(max, `must be less than or equal to ${max}`));
}

/**
 * The query parameters shared by the statement, the transaction list and the MED list, as
 * src/http/query.ts reads them (readPageAndDates): the schema the document states for them. An
 * empty value (`?per_page=`) takes the default, as an absent one does (`readerParam`).
 */
export const pageAndDatesQuery = {
  page: readerParam(z.string().regex(/^\d{1,9}$/), 'Page number, from 1 (default 1; empty = default)'),
  per_page: readerParam(z.string().regex(/^\d{1,9}$/), `Records per page, 1 to ${PER_PAGE_MAX} (default 20, also when empty; above ${PER_PAGE_MAX} is refused)`),
  date_from: readerParam(z.string().regex(/^\d{4}-\d{2}-\d{2}$/), 'YYYY-MM-DD, from 00:00:00Z of that day (empty = no bound)'),
  date_to: readerParam(z.string().regex(/^\d{4}-\d{2}-\d{2}$/), 'YYYY-MM-DD, through 23:59:59.999Z of that day (empty = no bound)'),
};
