import type { IncomingMessage } from 'node:http';
import type { FastifyError, FastifyReply, FastifyRequest } from 'fastify';
import { CHECK_VIOLATION, constraintName, sqlState } from '../db/db.js';
import { BOUND_CONSTRAINTS } from '../ledger/ledger.js';
import { AmountTooLargeError } from '../lib/money.js';
import { badRequest, businessError, HttpError, internalError } from './errors.js';

/**
 * The one place error answers are written. HttpErrors carry their exact body; framework errors
 * (unparseable JSON, body too large, unsupported media type outside the external API) become the
 * business shape; anything else is logged and answered 500 without internals.
 */
export function errorHandler(error: FastifyError | HttpError | Error, request: FastifyRequest, reply: FastifyReply) {
  const err = toHttpError(error, request);
  if (err.statusCode >= 500) request.log.error({ err: error }, 'request failed');
  void reply.code(err.statusCode).headers(err.headers).send(err.body);
  return reply;
}

export function toHttpError(error: unknown, request: FastifyRequest): HttpError {
  if (error instanceof HttpError) return error;
  // Amounts and balances past the bounds of src/lib/money.ts (checked addition or a database
  // CHECK): a clear 422 in the business shape, never a 500.
  if (error instanceof AmountTooLargeError) return businessError(422, 'amount_too_large', error.message);
  if (sqlState(error) === CHECK_VIOLATION && BOUND_CONSTRAINTS.has(constraintName(error) ?? '')) {
    return businessError(422, 'amount_too_large', 'the amount exceeds the maximum of one operation or of an account balance');
  }
  const fe = error as FastifyError;
  const status = typeof fe.statusCode === 'number' ? fe.statusCode : 500;
  if (status === 415) return businessError(415, 'unsupported_media_type', 'Content-Type must be application/json');
  if (status === 413) return businessError(413, 'payload_too_large', 'Request body is too large');
  if (status >= 400 && status < 500) {
    const message =
      fe.code === 'FST_ERR_CTP_EMPTY_JSON_BODY'
        ? 'Request body must not be empty'
        : fe.code === 'FST_ERR_CTP_INVALID_JSON_BODY' || error instanceof SyntaxError
          ? 'Request body is not valid JSON'
          : fe.message;
    return status === 400 ? badRequest(message) : businessError(status, 'bad_request', message);
  }
  return internalError(String(request.id));
}

/** Set on a raw request whose URL path was not valid percent-encoding (see rewriteMalformedUrl). */
const MALFORMED_URL = Symbol('pixgate.malformedUrl');

/** The URL prefixes of the APIs, each with its own pipeline and error shapes. */
export const API_PREFIXES = ['/api/external', '/api/v1/central', '/api/admin', '/api/sandbox'] as const;

export const MALFORMED_URL_MESSAGE = 'The URL path is not valid percent-encoding';

/**
 * Fastify's `rewriteUrl`: a path the router cannot decode (`/api/external/transactions/%E0%A4%A`)
 * would otherwise be answered by the framework itself, outside every API's pipeline and shapes.
 * It is rewritten to an unknown path under the same API prefix (query dropped) and flagged, so the
 * request runs that API's pipeline like any other (unauthenticated: 401; rate-limit headers on the
 * central API) and its not-found handler then answers 400 in the API's own shape.
 */
export function rewriteMalformedUrl(req: IncomingMessage): string {
  const url = req.url ?? '/';
  const q = url.indexOf('?');
  const path = q === -1 ? url : url.slice(0, q);
  try {
    decodeURIComponent(path);
    return url;
  } catch {
    (req as unknown as Record<symbol, boolean>)[MALFORMED_URL] = true;
    const prefix = API_PREFIXES.find((p) => path === p || path.startsWith(`${p}/`)) ?? '';
    return `${prefix}/malformed-url`;
  }
}

export function isMalformedUrl(req: FastifyRequest): boolean {
  return (req.raw as unknown as Record<symbol, boolean | undefined>)[MALFORMED_URL] === true;
}

/** The not-found handler of the APIs answering in the business shape (shape 4). */
export function notFoundHandler(req: FastifyRequest, reply: FastifyReply) {
  if (isMalformedUrl(req)) return reply.code(400).send(badRequest(MALFORMED_URL_MESSAGE).body);
  return reply.code(404).send({ errors: { not_found: 'route not found' } });
}
