import { STATUS_CODES, type IncomingMessage } from 'node:http';
import type { Socket } from 'node:net';
import type { FastifyError, FastifyReply, FastifyRequest } from 'fastify';
import { CHECK_VIOLATION, constraintName, isDatabaseUnavailable, sqlState } from '../db/db.js';
import { BOUND_CONSTRAINTS } from '../ledger/ledger.js';
import { OverloadedError } from '../lib/batcher.js';
import { AmountTooLargeError } from '../lib/money.js';
import { RailTimeoutError } from '../rail/rail.js';
import { PROBLEM_CONTENT_TYPE, pixProblem, toPixProblem, type PixProblems } from './apiPixProblems.js';
import { asHttpError, type ErrorShape } from './errorMap.js';
import { badRequest, businessError, HttpError, internalError, serviceUnavailable } from './errors.js';

/**
 * The one place error answers are written. HttpErrors carry their exact body; framework errors
 * (unparseable JSON, body too large, unsupported media type outside the external API) become the
 * business shape; anything else is logged and answered 500 without internals.
 */
export function errorHandler(error: FastifyError | HttpError | Error, request: FastifyRequest, reply: FastifyReply) {
  const err = toHttpError(error, request);
  if (err.statusCode === 503 && !(error instanceof HttpError)) request.log.warn({ err: error }, 'database unavailable: answered 503');
  else if (err.statusCode >= 500) request.log.error({ err: error }, 'request failed');
  void reply.code(err.statusCode).headers(err.headers).send(err.body);
  return reply;
}

export function toHttpError(error: unknown, request: FastifyRequest): HttpError {
  if (errorShapeOf(request) === 'api_pix') {
    const problems = (request.routeOptions?.config as { pixProblems?: PixProblems } | undefined)?.pixProblems;
    return toPixProblem(error, genericHttpError(error, request), problems, request.body);
  }
  return genericHttpError(error, request);
}

function genericHttpError(error: unknown, request: FastifyRequest): HttpError {
  const refusal = asHttpError(error, errorShapeOf(request));
  if (refusal) return refusal;
  // PostgreSQL down, restarting or dropping connections: "retry later", never 4xx/500 with the
  // driver's text (hosts, ports). The Idempotency-Key, if any, is freed (src/external/pipeline.ts).
  if (isDatabaseUnavailable(error)) return serviceUnavailable();
  // The rail did not answer in time (a call an operation could not go on without: a key look-up
  // while the simulated bank's database fails over, say): "retry later" too. An order without an
  // answer never gets here (it stays at stage 1 and is sent again), so nothing half-done is hidden.
  if (error instanceof RailTimeoutError) return serviceUnavailable();
  // A bounded queue was full: nothing was started; the client may send the same request again.
  if (error instanceof OverloadedError) {
    return serviceUnavailable('The server is busy; the request was not executed. Retry after the time in Retry-After', error.retryAfterSeconds);
  }
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

/** The error shape the matched route declared (RouteSpec.errorShape), `business` by default. */
export function errorShapeOf(request: FastifyRequest): ErrorShape {
  return ((request.routeOptions?.config as { errorShape?: ErrorShape } | undefined)?.errorShape) ?? 'business';
}

/** Set on a raw request whose URL path the router would refuse (see rewriteMalformedUrl). */
const MALFORMED_URL = Symbol('pixgate.malformedUrl');

/** The URL prefixes of the APIs, each with its own pipeline and error shapes. */
export const API_PREFIXES = ['/api/external', '/api/v1/central', '/api/admin', '/api/sandbox', '/api/pix/v2', '/api/pix', '/qr/v2'] as const;

/** Longest path segment the router accepts (ids, keys and tags are far shorter). */
export const MAX_PATH_SEGMENT_LENGTH = 1000;

export const MALFORMED_URL_MESSAGES = {
  encoding: 'The URL is not valid percent-encoding or encodes U+0000',
  length: `A URL path segment is longer than ${MAX_PATH_SEGMENT_LENGTH} characters`,
  dots: 'The URL path has "." or ".." segments',
} as const;
type MalformedUrl = keyof typeof MALFORMED_URL_MESSAGES;

/**
 * Fastify's `rewriteUrl`: a path the router cannot decode (`/api/external/transactions/%E0%A4%A`)
 * a segment over MAX_PATH_SEGMENT_LENGTH, or a `.`/`..` segment would otherwise be answered by the framework
 * itself, outside every API's pipeline and shapes. It is rewritten to an unknown path under the
 * same API prefix (query dropped) and flagged, so the request runs that API's pipeline like any
 * other (unauthenticated: 401; rate-limit headers on the central API) and the API's not-found
 * handler then answers 400 in its own shape.
 */
export function rewriteMalformedUrl(req: IncomingMessage): string {
  const url = req.url ?? '/';
  const q = url.indexOf('?');
  const path = q === -1 ? url : url.slice(0, q);
  let problem: MalformedUrl | null = null;
  try {
    // U+0000 cannot be stored or compared in PostgreSQL text: refused in the path and the query.
    if (decodeURIComponent(path).includes('\u0000') || /%00/i.test(url.slice(path.length))) throw new URIError('NUL');
    const segments = path.split('/');
    if (segments.some((segment) => segment.length > MAX_PATH_SEGMENT_LENGTH)) problem = 'length';
    // No route has dot segments; left in, the router may resolve them outside the prefix's API.
    else if (segments.some((segment) => /^(?:\.|%2e){1,2}$/i.test(segment))) problem = 'dots';
  } catch {
    problem = 'encoding';
  }
  if (problem === null) return url;
  (req as unknown as Record<symbol, MalformedUrl>)[MALFORMED_URL] = problem;
  const prefix = API_PREFIXES.find((p) => path === p || path.startsWith(`${p}/`)) ?? '';
  return `${prefix}/malformed-url`;
}

/** Why the request's URL was refused by rewriteMalformedUrl, or null. */
export function malformedUrlMessage(req: FastifyRequest): string | null {
  const problem = (req.raw as unknown as Record<symbol, MalformedUrl | undefined>)[MALFORMED_URL];
  return problem === undefined ? null : MALFORMED_URL_MESSAGES[problem];
}

/** The not-found handler of the APIs answering in the business shape (shape 4). */
export function notFoundHandler(req: FastifyRequest, reply: FastifyReply) {
  const malformed = malformedUrlMessage(req);
  // The API Pix payload reads (/qr/v2/…) are the façade's: RFC 7807 problems there too.
  if (req.url.startsWith('/qr/v2/')) {
    const answer = malformed !== null ? pixProblem(400, 'RequisicaoInvalida', malformed) : pixProblem(404, 'NaoEncontrado', 'Recurso não encontrado');
    return reply.code(answer.statusCode).headers(answer.headers).send(answer.body);
  }
  if (malformed !== null) return reply.code(400).send(badRequest(malformed).body);
  return reply.code(404).send({ errors: { not_found: 'route not found' } });
}

/**
 * Fastify's `frameworkErrors`: router errors that rewriteMalformedUrl did not foresee still answer
 * in the business shape, never in the framework's own body.
 */
export function frameworkErrors(error: FastifyError, _req: FastifyRequest, reply: FastifyReply) {
  void reply.code(400).send(badRequest(error.code === 'FST_ERR_MAX_PARAM_LENGTH' ? MALFORMED_URL_MESSAGES.length : MALFORMED_URL_MESSAGES.encoding).body);
}

/**
 * Fastify's `clientErrorHandler`: a request Node's HTTP parser refuses before any route or API is
 * known (headers over 16 KB, a broken request line) is answered in the business shape (shape 4),
 * the one shape every API documents, instead of the framework's own body.
 */
export function clientErrorHandler(error: Error & { code?: string }, socket: Socket) {
  if (error.code === 'ECONNRESET' || socket.destroyed || !socket.writable) {
    socket.destroy();
    return;
  }
  const status = error.code === 'HPE_HEADER_OVERFLOW' ? 431 : error.code === 'ERR_HTTP_REQUEST_TIMEOUT' ? 408 : 400;
  const message = status === 431 ? 'Request headers are too large' : status === 408 ? 'Request timed out' : 'Malformed HTTP request';
  // The API Pix façade answers RFC 7807 problems: its request line, when the parser got that far,
  // is in the bytes it refused (rawPacket).
  const line = ((error as { rawPacket?: Buffer }).rawPacket ?? Buffer.alloc(0)).subarray(0, 64).toString('latin1');
  const pix = /^[A-Z]{3,7} \/api\/pix[/? ]/.test(line);
  const answer = pix ? pixProblem(status, 'RequisicaoInvalida', message) : undefined;
  const body = JSON.stringify(answer ? answer.body : businessError(status, status === 400 ? 'bad_request' : status === 431 ? 'headers_too_large' : 'request_timeout', message).body);
  const type = pix ? PROBLEM_CONTENT_TYPE : 'application/json; charset=utf-8';
  socket.end(`HTTP/1.1 ${status} ${STATUS_CODES[status]}\r\nContent-Type: ${type}\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`);
}
