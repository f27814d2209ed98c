import { businessErrorCatalog, type FieldMap, type HttpError } from '../http/errors.js';

/**
 * Errors of POST /pix/cash-out. The spec names the codes but not the body that carries them; every
 * cash-out error answer is
 *
 *   {worked: false, errors: {<code>: <message>}, code: <code>, detail: <specific explanation>}
 *
 * — the business shape (`errors`) the rest of the API uses, plus `worked`/`detail` as in the
 * success body and `code` so clients can switch on one string. `errors.bad_request` holds a field
 * map for malformed requests.
 */
export const CASH_OUT_ERRORS = {
  bad_request: { status: 400, message: 'The request is malformed' },
  invalid_amount: { status: 422, message: 'amount must be an integer number of cents greater than 0' },
  unprocessable_entity: { status: 422, message: 'Invalid PIX key format' },
  pix_key_ambiguous: { status: 422, message: 'An 11-digit key may be a CPF or a phone number: send pix_key_type' },
  destination_not_found: { status: 422, message: 'Key not registered in the directory' },
  self_transfer: { status: 422, message: 'Transfer to own key (use TEF)' },
  same_institution_transfer: { status: 422, message: 'Recipient in same institution (use TEF)' },
  amount_limit_exceeded: { status: 422, message: 'Amount above the per-operation limit' },
  nighttime_limit_exceeded: { status: 422, message: 'Outside permitted hours' },
  daily_limit_exceeded: { status: 422, message: 'Daily cash-out limit reached' },
  insufficient_balance: { status: 400, message: 'Balance below amount plus fee' },
  provider_timeout: { status: 400, message: 'Timeout with the central bank; resend after 5 seconds' },
  external_id_conflict: { status: 409, message: 'external_id was already used with a different payload' },
} as const;

export type CashOutErrorCode = keyof typeof CASH_OUT_ERRORS;

const errors = businessErrorCatalog(CASH_OUT_ERRORS);

/** A cash-out error; `message` replaces the catalog message (unprocessable_entity carries its own). */
export function cashOutError(code: CashOutErrorCode, options: { detail?: string; message?: string } = {}): HttpError {
  return errors.error(code, options);
}

/** 400 with a field map (`{amount: ['is required']}`). */
export const cashOutBadRequest = (fields: FieldMap): HttpError => errors.badRequest(fields);
