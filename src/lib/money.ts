/**
 * Money is integers only. Requests carry cents; responses, statements, webhooks and the ledger use
 * base units, 1 cent = 100 base units (1 currency unit = 10000 base units).
 */
export const BASE_UNITS_PER_CENT = 100;

export function centsToBaseUnits(cents: number): number {
  if (!Number.isSafeInteger(cents)) throw new RangeError(`cents must be a safe integer, got ${cents}`);
  const base = cents * BASE_UNITS_PER_CENT;
  if (!Number.isSafeInteger(base)) throw new RangeError(`amount ${cents} cents overflows base units`);
  return base;
}

/** Sum of integers that throws instead of losing precision. */
export function safeSum(values: readonly number[]): number {
  let total = 0;
  for (const v of values) total = addMoney(total, v);
  return total;
}

/**
 * The per-operation business maximum of every amount in every API: R$ 1 billion, in cents. The
 * edge refuses more; the database CHECKs it on every statement record (x 100 in base units).
 */
export const MAX_AMOUNT_CENTS = 100_000_000_000;

/**
 * The largest balance a merchant book may hold, in base units (R$ 900 billion). Below 2^53, so
 * every balance, and the sum of an account's three books, stays an exact JavaScript number. The
 * database CHECKs it on every merchant book; a credit past it is refused (422 amount_too_large).
 */
export const MAX_BALANCE_BASE_UNITS = 9_000_000_000_000_000;

/** Raised when an amount or a sum leaves the bounds above. */
export class AmountTooLargeError extends RangeError {
  override name = 'AmountTooLargeError';
}

/**
 * Checked addition of two money figures (cents or base units): throws AmountTooLargeError instead
 * of losing precision. Use it for every `amount + fee` and every running sum.
 */
export function addMoney(a: number, b: number): number {
  if (!Number.isSafeInteger(a) || !Number.isSafeInteger(b)) throw new AmountTooLargeError(`not a safe integer: ${a} + ${b}`);
  const sum = a + b;
  if (!Number.isSafeInteger(sum)) throw new AmountTooLargeError(`${a} + ${b} overflows the safe integer range`);
  return sum;
}
