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
