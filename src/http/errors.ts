/**
 * The closed catalog of error bodies. The spec has four shapes, each owned by one layer:
 *   shape 1  {error: {status, message}}            content type, API key, IP whitelist, idempotency, rate limit
 *   shape 2  {error: 'forbidden', message}         permission
 *   shape 3  {worked: false, detail}               HMAC validation (and webhook creation 422)
 *   shape 4  {errors: {<atom>: message | fields}}  business errors (admin and sandbox APIs too)
 * Every error answer of pixgate is built here and thrown as an HttpError; one Fastify error handler
 * writes it.
 */
export { addField, newFieldMap, type FieldMap } from '../errors/catalog.js';
import type { CredentialRefusal } from '../auth/credentials.js';
import type { FieldMap } from '../errors/catalog.js';

export class HttpError extends Error {
  constructor(
    readonly statusCode: number,
    readonly body: unknown,
    readonly headers: Record<string, string> = {},
  ) {
    super(typeof body === 'object' ? JSON.stringify(body) : String(body));
    this.name = 'HttpError';
  }
}

/** Shape 1. */
export function pipelineError(status: number, message: string, extra: Record<string, unknown> = {}, headers: Record<string, string> = {}): HttpError {
  return new HttpError(status, { error: { status, message, ...extra } }, headers);
}

export const SHAPE1 = {
  unsupportedMediaType: 'Unsupported Media Type. Expected Content-Type: application/json',
  missingCredentials: 'Missing API key credentials. Use Authorization: ApiKey <client_id>:<client_secret>',
  invalidCredentials: 'Invalid API key credentials',
  inactiveKey: 'API key is inactive',
  expiredKey: 'API key has expired',
  emptyWhitelist: 'IP whitelist required. Configure at least one allowed IP to use this API key.',
  ipNotListed: 'Request IP not in API key whitelist',
  accountInactive: 'Account is not active',
  idempotencyKeyTooLong: 'Idempotency-Key must be at most 256 characters',
  rateLimited: 'Too many requests. Please try again later.',
} as const;

/** Shape 1: the 401 of credentials src/auth/credentials.ts `authenticate` refused. */
export function credentialsRefused(reason: CredentialRefusal): HttpError {
  return pipelineError(401, SHAPE1[reason]);
}

/** Shape 2. */
export function permissionError(permission: string): HttpError {
  return new HttpError(403, { error: 'forbidden', message: `API key lacks permission: ${permission}` });
}

/** Shape 3. */
export function workedFalse(status: number, detail: string, headers: Record<string, string> = {}): HttpError {
  return new HttpError(status, { worked: false, detail }, headers);
}

export const HMAC_DETAIL = {
  invalid: 'Invalid HMAC signature',
  missing: 'Missing HMAC header',
  bodyRequired: 'Request body is required for HMAC validation',
  bodyNotJson: 'Request body must be valid JSON for HMAC validation',
  notConfigured: 'HMAC secret not configured for this API key',
  v2Required: 'HMAC signature version 2 is required',
} as const;

/** Shape 4. `worked: false` is added beside `errors` where the spec says so (refund, statement). */
export function businessError(
  status: number,
  atom: string,
  detail: string | FieldMap | string[],
  options: { worked?: boolean; extra?: Record<string, unknown> } = {},
): HttpError {
  const body: Record<string, unknown> = {};
  if (options.worked) body.worked = false;
  body.errors = { [atom]: detail };
  if (options.extra) Object.assign(body, options.extra);
  return new HttpError(status, body);
}

export function badRequest(detail: string | FieldMap, options: { worked?: boolean } = {}): HttpError {
  return businessError(400, 'bad_request', detail, options);
}

export function notFound(message: string, options: { worked?: boolean } = {}): HttpError {
  return businessError(404, 'not_found', message, options);
}

export function unprocessable(message: string | FieldMap, options: { worked?: boolean } = {}): HttpError {
  return businessError(422, 'unprocessable_entity', message, options);
}

export function conflict(message: string, options: { worked?: boolean } = {}): HttpError {
  return businessError(409, 'conflict', message, options);
}

export function unauthorized(message: string): HttpError {
  return businessError(401, 'unauthorized', message);
}

/** Seconds a client is told to wait (Retry-After) when a store pixgate needs does not answer. */
export const UNAVAILABLE_RETRY_AFTER_SECONDS = 5;

export const SERVICE_UNAVAILABLE_MESSAGE = 'The service is temporarily unavailable; retry after the Retry-After seconds (with the same Idempotency-Key, a retry never runs an operation twice)';

/**
 * Every 503 past the request pipeline (the database does not answer: src/db/db.ts
 * `isDatabaseUnavailable`; a bounded queue is full: src/lib/batcher.ts `OverloadedError`) has one
 * body: shape 4 (`errors.service_unavailable`) with `worked: false`, `code` and `detail` beside it
 * — exactly the body of every cash-out error, and a superset of the business shape the other
 * routes answer in. Nothing about the cause: driver texts name hosts, ports and users.
 */
export function serviceUnavailable(message: string = SERVICE_UNAVAILABLE_MESSAGE, retryAfterSeconds: number = UNAVAILABLE_RETRY_AFTER_SECONDS): HttpError {
  return new HttpError(
    503,
    { worked: false, errors: { service_unavailable: message }, code: 'service_unavailable', detail: message },
    { 'retry-after': String(retryAfterSeconds) },
  );
}

export function internalError(requestId: string): HttpError {
  return businessError(500, 'internal_error', `Internal server error (request ${requestId})`);
}
