import { JsonDecimal } from '../lib/canonicalJson.js';
import { MAX_AMOUNT_CENTS } from '../lib/money.js';
/**
 * The spec's `external_id` rule (cash-out, and cash-in charges and their `tag` likewise): after
 * trimming, 1 to 128 bytes from `a-zA-Z0-9._:-` (all one-byte characters, so bytes = characters).
 */
export const EXTERNAL_ID = /^[a-zA-Z0-9._:-]{1,128}$/;
export const EXTERNAL_ID_MESSAGE = 'must be 1 to 128 characters from a-z A-Z 0-9 . _ : -';

/** `external_id` as sent (or null): trimmed, and a breach of the rule recorded with `add`. */
export function parseExternalId(raw: string | null, add: (field: string, message: string) => void): string | null {
  if (raw === null) return null;
  const externalId = raw.trim();
  if (!EXTERNAL_ID.test(externalId)) add('external_id', EXTERNAL_ID_MESSAGE);
  return externalId;
}

/**
 * A request's `amount` in cents: a JSON integer from 1 to MAX_AMOUNT_CENTS, or the operation's
 * `invalid_amount` error. Integer-ness is the JSON text's: `100.0` and `1e2` arrive as
 * JsonDecimal and are refused.
 */
export function amountInCents(value: unknown, invalid: (detail: string) => Error): number {
  if (typeof value !== 'number' || !Number.isSafeInteger(value) || value <= 0 || value > MAX_AMOUNT_CENTS) {
    const got = value instanceof JsonDecimal ? value.text : JSON.stringify(value);
    throw invalid(`amount must be an integer number of cents from 1 to ${MAX_AMOUNT_CENTS}, got ${got}`);
  }
  return value;
}
