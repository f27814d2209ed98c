import { addField, invalidFields, newFieldMap, type FieldMap } from '../errors/catalog.js';

/**
 * Reading a JSON object body field by field, collecting every problem in one field map (the 400
 * of the operation: a DomainError `bad_request` with the field map, src/errors/catalog.ts). Bodies come from the null-prototype parser (src/http/jsonBody.ts),
 * so a field named `__proto__` or `constructor` is an ordinary (refused) field.
 */
export interface BodyReader {
  readonly body: Record<string, unknown>;
  readonly fields: FieldMap;
  add(field: string, message: string): void;
  /** Sent and not null. */
  present(field: string): boolean;
  /** The string value, null when absent or null; a non-string is recorded as `must be a string`. */
  str(field: string): string | null;
  /** Throws the 400 if any problem was recorded so far. */
  check(): void;
}

/** A reader of `body`: refuses a non-object body at once and records every field not `permitted`. */
export function readBody(body: unknown, permitted: ReadonlySet<string>, badRequest: (fields: FieldMap) => Error = invalidFields): BodyReader {
  if (body === null || typeof body !== 'object' || Array.isArray(body)) throw badRequest({ body: ['must be a JSON object'] });
  const b = body as Record<string, unknown>;
  const fields = newFieldMap();
  const add = (field: string, message: string) => addField(fields, field, message);
  for (const key of Object.keys(b)) if (!permitted.has(key)) add(key, 'is not a permitted field');
  const present = (k: string) => Object.hasOwn(b, k) && b[k] !== undefined && b[k] !== null;
  return {
    body: b,
    fields,
    add,
    present,
    str(k) {
      if (!present(k)) return null;
      if (typeof b[k] !== 'string') {
        add(k, 'must be a string');
        return null;
      }
      return b[k] as string;
    },
    check() {
      if (Object.keys(fields).length > 0) throw badRequest(fields);
    },
  };
}
