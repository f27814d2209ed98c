/**
 * The documented error bodies of each API (docs/external-api.md "Errors", docs/boleto-api.md,
 * docs/admin-api.md), written independently of src/http/errors.ts: the fuzzer's oracle.
 *
 *   external  shape 1 {error: {status, message[, hint]}}
 *             shape 2 {error: 'forbidden', message}
 *             shape 3 {worked: false, detail}
 *             shape 4 {errors: {<atom>: message | messages | field map}[, worked: false][, code, detail, …]}
 *   central   {success: false, error: {code, message, details}, meta: {request_id}}
 *   admin, sandbox: shape 4
 */
export type Api = 'external' | 'central' | 'admin' | 'sandbox' | 'other';

const isObject = (v: unknown): v is Record<string, unknown> => v !== null && typeof v === 'object' && !Array.isArray(v);
const isStringArray = (v: unknown) => Array.isArray(v) && v.length > 0 && v.every((x) => typeof x === 'string');

function shape4Problem(body: Record<string, unknown>): string | null {
  const errors = body.errors;
  if (!isObject(errors)) return 'shape 4 without an errors object';
  const atoms = Object.keys(errors);
  if (atoms.length === 0) return 'shape 4 with an empty errors object';
  for (const atom of atoms) {
    const v = errors[atom];
    if (typeof v === 'string' || isStringArray(v)) continue;
    if (isObject(v) && Object.keys(v).length > 0 && Object.values(v).every(isStringArray)) continue;
    return `shape 4 errors.${atom} is neither a message, messages nor a field map`;
  }
  if ('worked' in body && body.worked !== false) return 'shape 4 with worked other than false';
  if ('error' in body) return 'shape 4 mixed with shape 1';
  if ('code' in body && typeof body.code !== 'string') return 'shape 4 code is not a string';
  if ('detail' in body && typeof body.detail !== 'string') return 'shape 4 detail is not a string';
  return null;
}

export function errorShapeProblem(api: Api, status: number, body: unknown): string | null {
  if (!isObject(body)) return 'error body is not a JSON object';
  if (api === 'central') {
    const error = body.error;
    if (body.success !== false) return 'central error without success: false';
    if (!isObject(error) || typeof error.code !== 'string' || typeof error.message !== 'string' || !isObject(error.details)) return 'central error object malformed';
    if (!isObject(body.meta) || typeof body.meta.request_id !== 'string') return 'central error without meta.request_id';
    return null;
  }
  if (api === 'external') {
    const keys = Object.keys(body).sort().join(',');
    if (isObject(body.error)) {
      const e = body.error;
      if (keys !== 'error') return 'shape 1 with extra top-level keys';
      if (e.status !== status) return `shape 1 status ${String(e.status)} differs from the HTTP status ${status}`;
      if (typeof e.message !== 'string') return 'shape 1 without a message';
      const extra = Object.keys(e).filter((k) => !['status', 'message', 'hint'].includes(k));
      return extra.length ? `shape 1 with unknown keys ${extra.join(',')}` : null;
    }
    if (body.error === 'forbidden') return keys === 'error,message' && typeof body.message === 'string' ? null : 'shape 2 malformed';
    if (keys === 'detail,worked') return body.worked === false && typeof body.detail === 'string' ? null : 'shape 3 malformed';
    return shape4Problem(body);
  }
  return shape4Problem(body);
}
