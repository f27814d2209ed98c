import type { FastifyError, FastifyReply, FastifyRequest } from 'fastify';
import type { z } from 'zod';
import { isDatabaseUnavailable } from '../db/db.js';
import { UNAVAILABLE_RETRY_AFTER_SECONDS } from '../http/errors.js';
import { fieldMap } from '../http/validation.js';

/**
 * The boleto central API's envelope, in the style of the spec's 429 body:
 *   success  {success: true, data, meta: {request_id, …}}
 *   error    {success: false, error: {code, message, details}, meta: {request_id}}
 * `details` is always an object ({} when there is nothing to add). Every error answer of this API
 * is a BoletoError from the closed catalog below, written by one error handler.
 */
export const BOLETO_ERRORS = {
  VALIDATION_ERROR: 400,
  INVALID_JSON: 400,
  UNAUTHORIZED: 401,
  NOT_FOUND: 404,
  BOLETO_ALREADY_EXISTS: 409,
  BOLETO_NOT_MODIFIABLE: 409,
  BOLETO_NOT_CANCELLABLE: 409,
  BOLETO_NOT_PAYABLE: 409,
  PAYMENT_MISMATCH: 422,
  BENEFICIARY_ACCOUNT_REQUIRED: 422,
  PAYLOAD_TOO_LARGE: 413,
  UNSUPPORTED_MEDIA_TYPE: 415,
  RATE_LIMITED: 429,
  INTERNAL_ERROR: 500,
  SERVICE_UNAVAILABLE: 503,
} as const;

export type BoletoErrorCode = keyof typeof BOLETO_ERRORS;

export class BoletoError extends Error {
  readonly statusCode: number;
  constructor(
    readonly code: BoletoErrorCode,
    message: string,
    readonly details: Record<string, unknown> = {},
    readonly headers: Record<string, string> = {},
  ) {
    super(message);
    this.name = 'BoletoError';
    this.statusCode = BOLETO_ERRORS[code];
  }
}

export const RATE_LIMITED_MESSAGE = 'Too many requests. Please try again later.';

export function validationError(error: z.ZodError, input: unknown): BoletoError {
  return new BoletoError('VALIDATION_ERROR', 'The request has invalid fields', { fields: fieldMap(error, input) });
}

/** Parses `input` with `schema` or throws VALIDATION_ERROR with a field map in `details.fields`. */
export function parseInput<S extends z.ZodType>(schema: S, input: unknown): z.output<S> {
  const result = schema.safeParse(input);
  if (!result.success) throw validationError(result.error, input);
  return result.data;
}

export function notFound(what: string): BoletoError {
  return new BoletoError('NOT_FOUND', `${what} not found`);
}

export function successBody(request: FastifyRequest, data: unknown, meta: Record<string, unknown> = {}) {
  return { success: true, data, meta: { request_id: String(request.id), ...meta } };
}

/** SERVICE_UNAVAILABLE with Retry-After: the database did not answer; nothing about the cause. */
export function serviceUnavailable(message = 'The service is temporarily unavailable; retry after the Retry-After seconds'): BoletoError {
  return new BoletoError('SERVICE_UNAVAILABLE', message, {}, { 'retry-after': String(UNAVAILABLE_RETRY_AFTER_SECONDS) });
}

export function errorBody(request: FastifyRequest, err: BoletoError) {
  return {
    success: false,
    error: { code: err.code, message: err.message, details: err.details },
    meta: { request_id: String(request.id) },
  };
}

/** Framework errors (body parsing, size, media type) mapped into the catalog. */
function fromFramework(error: FastifyError): BoletoError | undefined {
  const status = typeof error.statusCode === 'number' ? error.statusCode : 500;
  if (status === 415) return new BoletoError('UNSUPPORTED_MEDIA_TYPE', 'Content-Type must be application/json');
  if (status === 413) return new BoletoError('PAYLOAD_TOO_LARGE', 'Request body is too large');
  if (error.code === 'FST_ERR_CTP_INVALID_JSON_BODY' || error instanceof SyntaxError) {
    return new BoletoError('INVALID_JSON', 'Request body is not valid JSON');
  }
  if (status >= 400 && status < 500) return new BoletoError('VALIDATION_ERROR', error.message);
  return undefined;
}

/** The error handler of the boleto plugin scope. */
export function boletoErrorHandler(error: FastifyError | Error, request: FastifyRequest, reply: FastifyReply) {
  let err = error instanceof BoletoError ? error : isDatabaseUnavailable(error) ? serviceUnavailable() : fromFramework(error as FastifyError);
  if (err?.code === 'SERVICE_UNAVAILABLE' && !(error instanceof BoletoError)) request.log.warn({ err: error }, 'database unavailable: answered 503');
  if (!err) {
    request.log.error({ err: error }, 'boleto request failed');
    err = new BoletoError('INTERNAL_ERROR', `Internal server error (request ${String(request.id)})`);
  }
  void reply.code(err.statusCode).headers(err.headers).send(errorBody(request, err));
  return reply;
}
