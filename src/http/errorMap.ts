import { DomainError, type ErrorCode } from '../errors/catalog.js';
import { HttpError } from './errors.js';

/** The one status of each code of the catalog (src/errors/catalog.ts). */
export const ERROR_STATUS = {
  bad_request: 400,
  unauthorized: 401,
  not_found: 404,
  conflict: 409,
  unprocessable_entity: 422,
  amount_too_large: 422,
  invalid_amount: 422,
  pix_key_ambiguous: 422,
  destination_not_found: 422,
  self_transfer: 422,
  same_institution_transfer: 422,
  same_account: 422,
  amount_limit_exceeded: 422,
  nighttime_limit_exceeded: 422,
  daily_limit_exceeded: 422,
  // The spec's cash-out table gives 400 for both; TEF answers the same code with the same status.
  insufficient_balance: 400,
  provider_timeout: 400,
  external_id_conflict: 409,
  account_inactive: 422,
  destination_inactive: 422,
  destination_cannot_receive: 422,
  webhook_url_refused: 422,
  invalid_events: 400,
  boleto_already_exists: 409,
  boleto_not_modifiable: 409,
  boleto_not_cancellable: 409,
  boleto_not_payable: 409,
  boleto_payment_mismatch: 422,
  beneficiary_account_required: 422,
} as const satisfies Record<ErrorCode, number>;

/**
 * The body shapes a DomainError is written in; a route declares its own (RouteSpec.errorShape),
 * the default being `business`.
 *   operation        {worked: false, ...extra, errors: {<code>: <message | fields>}, code, detail}  cash-out, TEF
 *   business         {errors: {<code>: <message | fields>}, ...extra}                               shape 4
 *   business_worked  {worked: false, errors: {<code>: <message | fields>}, ...extra}                shape 4 where the spec adds worked (refund, statement)
 *   api_pix          RFC 7807 problem of the API Pix façade (/api/pix/v2), written by
 *                    src/http/apiPixProblems.ts from the error and the route's `pixProblems`
 *                    (errorHandler); here, without the route, it falls back to `business`
 */
export type ErrorShape = 'operation' | 'business' | 'business_worked' | 'api_pix';


/**
 * Codes whose answer has one wire form whatever the route's shape (the spec fixes it):
 *   webhook_url_refused  {worked: false, detail}          shape 3 of POST /webhooks (scheme, private destination)
 *   invalid_events       {errors: {events: [<message>]}}  POST /webhooks `events` refusals
 */
const CODE_BODY: Partial<Record<ErrorCode, (err: DomainError) => unknown>> = {
  webhook_url_refused: (err) => ({ worked: false, detail: err.detail }),
  invalid_events: (err) => ({ errors: { events: [err.message] } }),
};

/** The one status of `code`. */
export function statusOf(code: ErrorCode): number {
  return ERROR_STATUS[code];
}

/** The answer of a DomainError in the shape of the API that was called. */
export function domainErrorToHttp(err: DomainError, shape: ErrorShape = 'business'): HttpError {
  const status = ERROR_STATUS[err.code];
  const fixed = CODE_BODY[err.code];
  if (fixed) return new HttpError(status, fixed(err));
  const value = err.fields ?? err.message;
  if (shape === 'operation') {
    return new HttpError(status, { worked: false, ...err.extra, errors: { [err.code]: value }, code: err.code, detail: err.detail });
  }
  const body: Record<string, unknown> = {};
  if (shape === 'business_worked') body.worked = false;
  body.errors = { [err.code]: value };
  if (err.extra) Object.assign(body, err.extra);
  return new HttpError(status, body);
}


/**
 * The HTTP answer of a refusal, for edge code that shows or inspects one itself (the portal's
 * messages and statuses): an HttpError as it is, a DomainError in `shape`; undefined for anything
 * else (a fault, not a refusal).
 */
export function asHttpError(err: unknown, shape: ErrorShape = 'business'): HttpError | undefined {
  if (err instanceof HttpError) return err;
  if (err instanceof DomainError) return domainErrorToHttp(err, shape);
  return undefined;
}
