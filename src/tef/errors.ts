import { businessErrorCatalog, type FieldMap, type HttpError } from '../http/errors.js';

/**
 * Errors of a TEF (docs/tef.md), in the cash-out's error body:
 *   {worked: false, errors: {<code>: <message>}, code, detail}
 * A transfer that was recorded and could not settle (`destination_inactive`,
 * `destination_cannot_receive`, `insufficient_balance`) also carries its `transaction_id`, `status: failed` and `final: true`.
 */
export const TEF_ERRORS = {
  bad_request: { status: 400, message: 'The request is malformed' },
  invalid_amount: { status: 422, message: 'amount must be an integer number of cents greater than 0' },
  unprocessable_entity: { status: 422, message: 'Invalid PIX key format' },
  pix_key_ambiguous: { status: 422, message: 'An 11-digit key may be a CPF or a phone number: send pix_key_type' },
  destination_not_found: { status: 422, message: 'Destination account not found in this institution' },
  same_account: { status: 422, message: 'Source and destination are the same account' },
  amount_limit_exceeded: { status: 422, message: 'Amount above the per-operation limit' },
  nighttime_limit_exceeded: { status: 422, message: 'Outside permitted hours' },
  daily_limit_exceeded: { status: 422, message: 'Daily cash-out limit reached' },
  external_id_conflict: { status: 409, message: 'external_id was already used with a different payload' },
  account_inactive: { status: 422, message: 'Account is not active' },
  destination_inactive: { status: 422, message: 'The destination account is not active; the transfer failed' },
  destination_cannot_receive: { status: 422, message: 'The destination account cannot receive this transfer; the transfer failed' },
  insufficient_balance: { status: 422, message: 'Balance below the amount; the transfer failed' },
} as const;

export type TefErrorCode = keyof typeof TEF_ERRORS;

const errors = businessErrorCatalog(TEF_ERRORS);

export function tefError(code: TefErrorCode, options: { detail?: string; message?: string; extra?: Record<string, unknown> } = {}): HttpError {
  return errors.error(code, options);
}

export const tefBadRequest = (fields: FieldMap): HttpError => errors.badRequest(fields);
