import { z } from 'zod';
import { JsonDecimal } from '../lib/canonicalJson.js';
import { MAX_AMOUNT_CENTS } from '../lib/money.js';
import { addField, badRequest, newFieldMap, type FieldMap } from './errors.js';

/**
 * Turns zod issues into the spec's field map (`{amount: ['is required']}`), with messages in the
 * style of the spec's examples.
 */
export function fieldMap(error: z.ZodError, input?: unknown): FieldMap {
  const map = newFieldMap();
  const add = (path: string, message: string) => addField(map, path, message);
  const wrongType = new Set<string>();
  for (const issue of error.issues) {
    const path = issue.path.map(String).join('.') || 'body';
    // zod 4 still runs length checks on a value of the wrong type (an array's max on a string):
    // once a field is the wrong type, nothing else is said about it.
    if (wrongType.has(path)) continue;
    if (issue.code === 'invalid_type') wrongType.add(path);
    switch (issue.code) {
      case 'invalid_type':
        if (valueAt(input, issue.path) === undefined) add(path, 'is required');
        else if (issue.expected === 'int' || valueAt(input, issue.path) instanceof JsonDecimal) add(path, 'must be an integer');
        else if (issue.expected === 'object' && path === 'body') add(path, 'must be a JSON object');
        else add(path, `must be ${article(issue.expected)}`);
        break;
      case 'unrecognized_keys':
        for (const key of issue.keys) add(issue.path.length ? `${path}.${key}` : key, 'is not a permitted field');
        break;
      case 'too_small':
        if (issue.origin === 'string') add(path, issue.minimum === 1 ? "can't be blank" : `is too short (minimum is ${issue.minimum} characters)`);
        else if (issue.origin === 'array') add(path, issue.minimum === 1 ? "can't be blank" : `must have at least ${issue.minimum} items`);
        else add(path, `must be greater than ${issue.inclusive ? 'or equal to ' : ''}${issue.minimum}`);
        break;
      case 'too_big':
        if (issue.origin === 'string') add(path, `is too long (maximum is ${issue.maximum} characters)`);
        else if (issue.origin === 'array') add(path, `must have at most ${issue.maximum} items`);
        else add(path, `must be less than ${issue.inclusive ? 'or equal to ' : ''}${issue.maximum}`);
        break;
      case 'invalid_value':
        if (valueAt(input, issue.path) === undefined) add(path, 'is required');
        else add(path, `must be one of: ${issue.values.map(String).join(', ')}`);
        break;
      default:
        add(path, issue.message);
    }
  }
  return map;
}

function valueAt(input: unknown, path: readonly PropertyKey[]): unknown {
  let v = input;
  for (const key of path) {
    // Own properties only: `constructor` of an object that has none is absent, not Object.
    if (v === null || typeof v !== 'object' || !Object.hasOwn(v, key)) return undefined;
    v = (v as Record<PropertyKey, unknown>)[key];
  }
  return v;
}

function article(type: string): string {
  return /^[aeiou]/.test(type) ? `an ${type}` : `a ${type}`;
}

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
