import type { z } from 'zod';
import { JsonDecimal } from '../lib/canonicalJson.js';
import { addField, invalidFields, newFieldMap, type FieldMap } from './catalog.js';

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

/**
 * Parses `input` with `schema` or throws the catalog's `bad_request` with the field map: how domain
 * code validates what it is given (the edge's `parseOrThrow` writes the same 400).
 */
export function parseFields<S extends z.ZodType>(schema: S, input: unknown): z.output<S> {
  const result = schema.safeParse(input);
  if (!result.success) throw invalidFields(fieldMap(result.error, input));
  return result.data;
}
