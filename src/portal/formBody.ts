/** A posted form's body (application/x-www-form-urlencoded) and the readers of its fields. */

/** The largest form body the portal reads. */
export const FORM_LIMIT_BYTES = 64 * 1024;

export type Form = Record<string, string | string[]>;

/** A form body as a null-prototype map (repeated names become arrays). */
export function parseForm(text: string): Form {
  const out = Object.create(null) as Form;
  for (const [k, v] of new URLSearchParams(text)) {
    const prev = out[k];
    out[k] = prev === undefined ? v : Array.isArray(prev) ? [...prev, v] : [prev, v];
  }
  return out;
}

/** A field's first value. */
export const one = (f: Form, name: string): string | undefined => {
  const v = f[name];
  return Array.isArray(v) ? v[0] : v;
};

/** All of a field's values (checkboxes). */
export const many = (f: Form, name: string): string[] => {
  const v = f[name];
  return v === undefined ? [] : Array.isArray(v) ? v : [v];
};

/** A form's optional text: absent or blank → undefined. */
export const opt = (f: Form, name: string): string | undefined => {
  const v = one(f, name)?.trim();
  return v ? v : undefined;
};

/**
 * Whether a POST to a portal or console page carries a form: browsers post forms as
 * application/x-www-form-urlencoded; any other body (JSON, a bare `null`, text) is refused with
 * 415 before a page reads it.
 */
export const postsAForm = (contentType: string | undefined, body: unknown): boolean =>
  (contentType ?? '').split(';')[0]!.trim().toLowerCase() === 'application/x-www-form-urlencoded' || (contentType === undefined && body === undefined);
