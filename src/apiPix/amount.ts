/**
 * Amounts of the API Pix façade: the standard writes money as a decimal string with exactly two
 * decimals and at most ten integer digits (`"12.34"`); pixgate counts integer cents. Both ways
 * are string work on digits, never floating point.
 */
export const DECIMAL_AMOUNT = /^(\d{1,10})\.(\d{2})$/;

/** Largest amount the standard's form can write: 9999999999.99. */
export const MAX_DECIMAL_CENTS = 999_999_999_999;

/** Cents of `"12.34"` (1234); null when the text is not in the standard's form. */
export function decimalToCents(text: string): number | null {
  const m = DECIMAL_AMOUNT.exec(text);
  if (!m) return null;
  // At most 12 digits in all: exact as a double's integer, and no digit passes through a fraction.
  return Number(`${m[1]}${m[2]}`);
}

/** `"12.34"` of 1234 cents. Throws on a value the standard's form cannot carry. */
export function centsToDecimal(cents: number): string {
  if (!Number.isSafeInteger(cents) || cents < 0 || cents > MAX_DECIMAL_CENTS) throw new RangeError(`not an amount of cents the standard can write: ${cents}`);
  const digits = String(cents).padStart(3, '0');
  return `${digits.slice(0, -2)}.${digits.slice(-2)}`;
}
