import { addField, DomainError, invalidFields, newFieldMap } from '../errors/catalog.js';
import { MAX_AMOUNT_CENTS } from '../lib/money.js';
import { DESCRIPTION_MAX } from './cashOutCommand.js';

/** A refund request, validated. */
export interface RefundRequest {
  /** The original's id as sent (transaction_id, end-to-end id or internal id). */
  originalId: string;
  /** Which field carried it. */
  originalIdField: string;
  amountCents: number | null;
  returnCode: string;
  description: string;
}

/**
 * Where the original's id may come from, first found wins (spec, Refund). A key counts as found
 * when it holds something other than null or an empty string.
 *
 * Under `X-Key-Case: camelCase` the pipeline converts body keys to snake_case before this runs, so a
 * camelCase `originalTransactionId` arrives as `original_transaction_id` (the first alias) and
 * `originalE2eId` as `original_e2e_id`. The literal `originalTransactionId` alias therefore only
 * matters for clients that send that camelCase key without the header.
 */
export const ORIGINAL_ID_ALIASES = ['original_transaction_id', 'original_e2e_id', 'originalTransactionId', 'transaction_id', 'end_to_end_id'] as const;
export const DEFAULT_RETURN_CODE = 'MD06';
export const DEFAULT_REFUND_DESCRIPTION = 'Devolução PIX';
const RETURN_CODE_MAX = 35;

const ALLOWED = new Set<string>([...ORIGINAL_ID_ALIASES, 'amount', 'reason', 'return_code', 'description']);

/**
 * Validates the body of POST /pix/refund. Errors are 400 with `worked: false` beside `errors`
 * (refund business errors carry it): no id at all is `original_transaction_id is required`, other
 * problems a field map. `reason` (alias `return_code`) is not judged here: any code is forwarded
 * and the rail rejects unknown ones later.
 */
export function parseRefund(body: unknown): RefundRequest {
  if (body === null || typeof body !== 'object' || Array.isArray(body)) throw invalidFields({ body: ['must be a JSON object'] });
  const b = body as Record<string, unknown>;
  const fields = newFieldMap();
  const add = (f: string, m: string) => addField(fields, f, m);
  for (const k of Object.keys(b)) if (!ALLOWED.has(k)) add(k, 'is not a permitted field');

  const idField = ORIGINAL_ID_ALIASES.find((k) => b[k] !== undefined && b[k] !== null && b[k] !== '');
  if (idField === undefined) {
    if (Object.keys(fields).length > 0) throw invalidFields(fields);
    throw new DomainError('bad_request', { message: 'original_transaction_id is required' });
  }
  const id = b[idField];
  if (typeof id !== 'string' || id.trim() === '' || id.length > 64) add(idField, 'must be a transaction id or an end-to-end id');
  // The aliases after the one that wins are not read, but each is still a string (or null) when sent.
  for (const k of ORIGINAL_ID_ALIASES) {
    if (k !== idField && b[k] !== undefined && b[k] !== null && typeof b[k] !== 'string') add(k, 'must be a transaction id or an end-to-end id');
  }

  let amountCents: number | null = null;
  if (b.amount !== undefined && b.amount !== null) {
    if (typeof b.amount !== 'number' || !Number.isSafeInteger(b.amount)) add('amount', 'must be an integer (cents)');
    else if (b.amount <= 0) add('amount', 'must be greater than 0');
    else if (b.amount > MAX_AMOUNT_CENTS) add('amount', `must be less than or equal to ${MAX_AMOUNT_CENTS}`);
    else amountCents = b.amount;
  }
  const reasonField = b.reason !== undefined && b.reason !== null ? 'reason' : 'return_code';
  const reason = b[reasonField];
  let returnCode = DEFAULT_RETURN_CODE;
  if (reason !== undefined && reason !== null) {
    if (typeof reason !== 'string' || reason.trim() === '' || reason.length > RETURN_CODE_MAX) add(reasonField, `must be a return code of 1 to ${RETURN_CODE_MAX} characters`);
    else returnCode = reason.trim();
  }
  let description = DEFAULT_REFUND_DESCRIPTION;
  if (b.description !== undefined && b.description !== null) {
    if (typeof b.description !== 'string') add('description', 'must be a string');
    else if ([...b.description].length > DESCRIPTION_MAX) add('description', `is too long (maximum is ${DESCRIPTION_MAX} characters)`);
    else if (b.description.trim() !== '') description = b.description;
  }
  if (Object.keys(fields).length > 0) throw invalidFields(fields);
  return { originalId: (id as string).trim(), originalIdField: idField, amountCents, returnCode, description };
}
