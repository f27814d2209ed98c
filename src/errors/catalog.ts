/**
 * The one closed catalog of pixgate's domain errors. Domain code (pix, tef, med, boleto, merchants,
 * statement, webhooks, events, retention) throws a DomainError with a code from this catalog and,
 * where it has one, a specific explanation (`detail`) or a field map; it never names an HTTP status
 * or an answer's shape. The HTTP edge maps each code to ONE status and writes the body in the shape
 * of the API that was called (src/http/errorMap.ts). Adding a code is adding a line here and its
 * status there; the type system refuses a code that is in one table and not the other.
 */

/** A field map of a malformed request: field name → messages (`{amount: ['is required']}`). */
export type FieldMap = Record<string, string[]>;

/**
 * An empty field map without a prototype: a field named `constructor`, `toString` or `__proto__`
 * (a key a client sent) is an ordinary entry. Every field map is built with these two helpers.
 */
export function newFieldMap(): FieldMap {
  return Object.create(null) as FieldMap;
}

/** Appends `message` to the messages of `field`. */
export function addField(map: FieldMap, field: string, message: string): void {
  const list = Object.hasOwn(map, field) ? map[field]! : (map[field] = []);
  list.push(message);
}

/** Every code with its default message (the message the answer carries unless the thrower gives one). */
export const ERROR_CATALOG = {
  // Generic business errors of every API (shape 4 of the spec).
  bad_request: 'The request is malformed',
  unauthorized: 'Unauthorized',
  not_found: 'Not found',
  conflict: 'The request conflicts with the current state',
  unprocessable_entity: 'The request cannot be processed',
  amount_too_large: 'the amount exceeds the maximum of one operation or of an account balance',
  // Cash-out and TEF (the spec's cash-out codes; TEF uses the same code for the same refusal).
  invalid_amount: 'amount must be an integer number of cents greater than 0',
  pix_key_ambiguous: 'An 11-digit key may be a CPF or a phone number: send pix_key_type',
  destination_not_found: 'Key not registered in the directory',
  self_transfer: 'Transfer to own key (use TEF)',
  same_institution_transfer: 'Recipient in same institution (use TEF)',
  same_account: 'Source and destination are the same account',
  amount_limit_exceeded: 'Amount above the per-operation limit',
  nighttime_limit_exceeded: 'Outside permitted hours',
  daily_limit_exceeded: 'Daily cash-out limit reached',
  insufficient_balance: 'Balance below amount plus fee',
  provider_timeout: 'Timeout with the central bank; resend after 5 seconds',
  external_id_conflict: 'external_id was already used with a different payload',
  account_inactive: 'Account is not active',
  destination_inactive: 'The destination account is not active; the transfer failed',
  destination_cannot_receive: 'The destination account cannot receive this transfer; the transfer failed',
  // Webhook registration (docs/webhooks.md): refusals with a wire form of their own (src/http/errorMap.ts CODE_BODY).
  webhook_url_refused: 'The webhook URL is refused',
  invalid_events: 'events is invalid',
  // Boleto central API (docs/boleto-api.md): written at the boleto edge with its UPPER_CASE wire codes.
  boleto_already_exists: 'A boleto with this nosso_numero already exists',
  boleto_not_modifiable: 'The boleto cannot be changed',
  boleto_not_cancellable: 'The boleto cannot be cancelled',
  boleto_not_payable: 'The boleto cannot be paid',
  boleto_payment_mismatch: 'amount_cents differs from the amount of the boleto',
  beneficiary_account_required: 'beneficiary_ispb is this institution, but the API key has no beneficiary account to credit',
} as const satisfies Record<string, string>;

export type ErrorCode = keyof typeof ERROR_CATALOG;

export interface DomainErrorOptions {
  /** Replaces the catalog's message for this code (the spec's own wording where it gives one). */
  message?: string;
  /** A specific explanation of this occurrence (defaults to the message). */
  detail?: string;
  /** bad_request: the field map of the malformed request, in place of a message. */
  fields?: FieldMap;
  /** Fields the answer carries beside the error (a recorded TEF's `transaction_id`, `status`, `final`). */
  extra?: Record<string, unknown>;
}

/** A refusal the domain decided: a code of the catalog, never an HTTP status. */
export class DomainError extends Error {
  readonly code: ErrorCode;
  readonly detail: string;
  readonly fields: FieldMap | undefined;
  readonly extra: Record<string, unknown> | undefined;
  constructor(code: ErrorCode, options: DomainErrorOptions = {}) {
    const message = options.message ?? ERROR_CATALOG[code];
    super(message);
    this.name = 'DomainError';
    this.code = code;
    this.fields = options.fields;
    this.extra = options.extra;
    this.detail = options.detail ?? (options.fields ? describeFields(options.fields) : message);
  }
}


/** bad_request with a field map (`{amount: ['is required']}`). */
export function invalidFields(fields: FieldMap): DomainError {
  return new DomainError('bad_request', { fields });
}

/** `amount is required; pix_key must be a string`: the detail of a field map. */
export function describeFields(fields: FieldMap): string {
  return Object.entries(fields)
    .map(([field, messages]) => `${field} ${messages.join(', ')}`)
    .join('; ');
}
