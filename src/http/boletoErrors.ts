import type { FastifyError, FastifyReply, FastifyRequest } from 'fastify';
import type { z } from 'zod';
import { isDatabaseUnavailable } from '../db/db.js';
import { DomainError, type ErrorCode } from '../errors/catalog.js';
import { fieldMap } from '../errors/fields.js';
import { UNAVAILABLE_RETRY_AFTER_SECONDS } from './errors.js';

/**
 * The boleto central API's envelope, in the style of the spec's 429 body:
 *   success  {success: true, data, meta: {request_id, …}}
 *   error    {success: false, error: {code, message, details}, meta: {request_id}}
 * `details` is always an object ({} when there is nothing to add). Every error answer of this API
 * is a BoletoError from the closed catalog of wire codes below, written by one error handler. The
 * boleto domain (src/boleto/) throws DomainErrors of the one catalog (src/errors/catalog.ts);
 * BOLETO_WIRE names each one's wire code here, at the boleto edge.
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

/**
 * The wire code of each catalog code the boleto API answers. Its status is BOLETO_ERRORS' status of
 * the wire code, which is the code's one status (ERROR_STATUS; test/unit/errorCatalog.test.ts).
 */
export const BOLETO_WIRE = {
  bad_request: 'VALIDATION_ERROR',
  not_found: 'NOT_FOUND',
  boleto_already_exists: 'BOLETO_ALREADY_EXISTS',
  boleto_not_modifiable: 'BOLETO_NOT_MODIFIABLE',
  boleto_not_cancellable: 'BOLETO_NOT_CANCELLABLE',
  boleto_not_payable: 'BOLETO_NOT_PAYABLE',
  boleto_payment_mismatch: 'PAYMENT_MISMATCH',
  beneficiary_account_required: 'BENEFICIARY_ACCOUNT_REQUIRED',
} as const satisfies Partial<Record<ErrorCode, BoletoErrorCode>>;

export const VALIDATION_MESSAGE = 'The request has invalid fields';

/**
 * A DomainError in the boleto envelope: a field map goes to `details.fields` under VALIDATION_ERROR's
 * message, any other refusal keeps its message with its `extra` as `details`. Undefined for a code
 * the boleto API does not answer (then a 500: a domain error this API never meant to raise).
 */
export function domainErrorToBoleto(err: DomainError): BoletoError | undefined {
  const wire = (BOLETO_WIRE as Partial<Record<ErrorCode, BoletoErrorCode>>)[err.code];
  if (wire === undefined) return undefined;
  if (err.fields) return new BoletoError(wire, VALIDATION_MESSAGE, { fields: err.fields });
  return new BoletoError(wire, err.message, err.extra ?? {});
}

export const RATE_LIMITED_MESSAGE = 'Too many requests. Please try again later.';

export function validationError(error: z.ZodError, input: unknown): BoletoError {
  return new BoletoError('VALIDATION_ERROR', VALIDATION_MESSAGE, { fields: fieldMap(error, input) });
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
  let err =
    error instanceof BoletoError
      ? error
      : error instanceof DomainError
        ? domainErrorToBoleto(error)
        : isDatabaseUnavailable(error)
          ? serviceUnavailable()
          : fromFramework(error as FastifyError);
  if (err?.code === 'SERVICE_UNAVAILABLE' && !(error instanceof BoletoError)) request.log.warn({ err: error }, 'database unavailable: answered 503');
  if (!err) {
    request.log.error({ err: error }, 'boleto request failed');
    err = new BoletoError('INTERNAL_ERROR', `Internal server error (request ${String(request.id)})`);
  }
  void reply.code(err.statusCode).headers(err.headers).send(errorBody(request, err));
  return reply;
}
