/**
 * FEBRABAN boleto ("ficha de compensação") barcode and linha digitável. Pure functions.
 *
 * Barcode, 44 digits:
 *   1-3    bank code (COMPE)
 *   4      currency code (9 = real)
 *   5      general check digit: módulo 11 of the other 43 digits
 *   6-9    due-date factor
 *   10-19  amount in cents, zero-padded
 *   20-44  free field ("campo livre", 25 digits, the issuer's own layout)
 *
 * Linha digitável, 47 digits, the same content reordered into five fields:
 *   field 1  barcode 1-4 + 20-24, then a módulo 10 check digit       (10 digits)
 *   field 2  barcode 25-34, then a módulo 10 check digit              (11 digits)
 *   field 3  barcode 35-44, then a módulo 10 check digit              (11 digits)
 *   field 4  the general check digit (barcode 5)                      (1 digit)
 *   field 5  due-date factor + amount (barcode 6-19)                  (14 digits)
 *
 * Due-date factor: days from the base date 1997-10-07. It reached 9999 on 2025-02-21; from
 * 2025-02-22 it restarts at 1000 and counts up again, a cycle of 9000 days (FEBRABAN). Reading a
 * factor back needs a reference date: FEBRABAN accepts boletos due up to 3,000 factors before and
 * 5,500 factors after the current date, so a factor is read as the one date in the 9000-day window
 * (reference − 3500 days, reference + 5500 days].
 */

export const CURRENCY_REAL = '9';
export const BARCODE_LENGTH = 44;
export const LINHA_DIGITAVEL_LENGTH = 47;
/** Largest amount the 10-digit amount field holds: R$ 99,999,999.99. */
export const MAX_AMOUNT_CENTS = 9_999_999_999;

const DAY_MS = 86_400_000;
const FACTOR_BASE_MS = Date.UTC(1997, 9, 7);
const FACTOR_MIN = 1000;
const FACTOR_CYCLE_DAYS = 9000;
/** FEBRABAN: boletos are payable up to 5,500 factors after the current date. */
export const MAX_DAYS_AHEAD = 5500;
const DECODE_DAYS_BEHIND = FACTOR_CYCLE_DAYS - MAX_DAYS_AHEAD;

const DIGITS = /^\d+$/;

/** Módulo 10: weights 2, 1, 2, … from the right; products above 9 add their digits. */
export function mod10(digits: string): number {
  let sum = 0;
  let weight = 2;
  for (let i = digits.length - 1; i >= 0; i--) {
    const product = Number(digits[i]) * weight;
    sum += product > 9 ? product - 9 : product;
    weight = weight === 2 ? 1 : 2;
  }
  return (10 - (sum % 10)) % 10;
}

/** Módulo 11 of the barcode: weights 2 to 9 from the right, repeating; results 0, 10 and 11 become 1. */
export function mod11(digits: string): number {
  let sum = 0;
  let weight = 2;
  for (let i = digits.length - 1; i >= 0; i--) {
    sum += Number(digits[i]) * weight;
    weight = weight === 9 ? 2 : weight + 1;
  }
  const digit = 11 - (sum % 11);
  return digit === 0 || digit === 10 || digit === 11 ? 1 : digit;
}

/** Milliseconds at 00:00 UTC of a `YYYY-MM-DD` calendar date; NaN when it is not a real date. */
export function dateMs(date: string): number {
  const match = /^(\d{4})-(\d{2})-(\d{2})$/.exec(date);
  if (!match) return NaN;
  const [y, m, d] = [Number(match[1]), Number(match[2]), Number(match[3])];
  const ms = Date.UTC(y, m - 1, d);
  const back = new Date(ms);
  return back.getUTCFullYear() === y && back.getUTCMonth() === m - 1 && back.getUTCDate() === d ? ms : NaN;
}

export function isCalendarDate(date: string): boolean {
  return !Number.isNaN(dateMs(date));
}

/** `YYYY-MM-DD` of a UTC timestamp in milliseconds. */
function dateOfMs(ms: number): string {
  return new Date(ms).toISOString().slice(0, 10);
}

/** Adds whole days to a `YYYY-MM-DD` date. */
export function addDays(date: string, days: number): string {
  return dateOfMs(dateMs(date) + days * DAY_MS);
}

/** Due-date factor (1000 to 9999) of a date on or after 2000-07-03 (factor 1000 of the first cycle). */
export function dueDateFactor(dueDate: string): number {
  const ms = dateMs(dueDate);
  if (Number.isNaN(ms)) throw new RangeError(`not a calendar date: ${dueDate}`);
  const days = Math.round((ms - FACTOR_BASE_MS) / DAY_MS);
  if (days < FACTOR_MIN) throw new RangeError(`due date ${dueDate} is before 2000-07-03, which has no factor`);
  return ((days - FACTOR_MIN) % FACTOR_CYCLE_DAYS) + FACTOR_MIN;
}

/** The one date with this factor in (reference − 3500 days, reference + 5500 days]. */
export function dueDateFromFactor(factor: number, referenceDate: string): string {
  if (!Number.isInteger(factor) || factor < FACTOR_MIN || factor > 9999) throw new RangeError(`not a due-date factor: ${factor}`);
  const refDays = Math.round((dateMs(referenceDate) - FACTOR_BASE_MS) / DAY_MS);
  const lowest = refDays - DECODE_DAYS_BEHIND + 1;
  // The smallest day count >= lowest that has this factor.
  const offset = (((factor - lowest) % FACTOR_CYCLE_DAYS) + FACTOR_CYCLE_DAYS) % FACTOR_CYCLE_DAYS;
  return dateOfMs(FACTOR_BASE_MS + (lowest + offset) * DAY_MS);
}

export interface BarcodeFields {
  /** COMPE bank code, 3 digits. */
  bankCode: string;
  dueDate: string;
  /** 0 to 9,999,999,999. */
  amountCents: number;
  /** The issuer's 25 digits. */
  freeField: string;
}

/** The 44-digit barcode of a boleto in reais. */
export function buildBarcode(fields: BarcodeFields): string {
  if (!/^\d{3}$/.test(fields.bankCode)) throw new RangeError('bank code must be 3 digits');
  if (!/^\d{25}$/.test(fields.freeField)) throw new RangeError('free field must be 25 digits');
  if (!Number.isSafeInteger(fields.amountCents) || fields.amountCents < 0 || fields.amountCents > MAX_AMOUNT_CENTS) {
    throw new RangeError(`amount ${fields.amountCents} does not fit the 10-digit amount field`);
  }
  const factor = String(dueDateFactor(fields.dueDate));
  const amount = String(fields.amountCents).padStart(10, '0');
  const withoutDigit = `${fields.bankCode}${CURRENCY_REAL}${factor}${amount}${fields.freeField}`;
  return `${withoutDigit.slice(0, 4)}${mod11(withoutDigit)}${withoutDigit.slice(4)}`;
}

/** True when the string is 44 digits whose general check digit verifies. */
export function isValidBarcode(barcode: string): boolean {
  if (barcode.length !== BARCODE_LENGTH || !DIGITS.test(barcode)) return false;
  return Number(barcode[4]) === mod11(barcode.slice(0, 4) + barcode.slice(5));
}

/** The linha digitável (47 digits, no punctuation) of a barcode. */
export function barcodeToLinhaDigitavel(barcode: string): string {
  if (!isValidBarcode(barcode)) throw new RangeError('not a valid boleto barcode');
  const field1 = barcode.slice(0, 4) + barcode.slice(19, 24);
  const field2 = barcode.slice(24, 34);
  const field3 = barcode.slice(34, 44);
  return `${field1}${mod10(field1)}${field2}${mod10(field2)}${field3}${mod10(field3)}${barcode[4]}${barcode.slice(5, 19)}`;
}

/**
 * True when the string is 47 digits whose three field check digits (módulo 10) and general check
 * digit (módulo 11 of the barcode it stands for) verify. Punctuation is not accepted here.
 */
export function isValidLinhaDigitavel(linha: string): boolean {
  if (linha.length !== LINHA_DIGITAVEL_LENGTH || !DIGITS.test(linha)) return false;
  const fieldsOk =
    mod10(linha.slice(0, 9)) === Number(linha[9]) &&
    mod10(linha.slice(10, 20)) === Number(linha[20]) &&
    mod10(linha.slice(21, 31)) === Number(linha[31]);
  return fieldsOk && isValidBarcode(reorderToBarcode(linha));
}

function reorderToBarcode(linha: string): string {
  return linha.slice(0, 4) + linha[32] + linha.slice(33, 47) + linha.slice(4, 9) + linha.slice(10, 20) + linha.slice(21, 31);
}

/** The barcode a valid linha digitável stands for. */
export function linhaDigitavelToBarcode(linha: string): string {
  if (!isValidLinhaDigitavel(linha)) throw new RangeError('not a valid linha digitável');
  return reorderToBarcode(linha);
}

/** The printed form: `AAABC.CCCCX DDDDD.DDDDDY EEEEE.EEEEEZ K UUUUVVVVVVVVVV`. */
export function formatLinhaDigitavel(linha: string): string {
  return `${linha.slice(0, 5)}.${linha.slice(5, 10)} ${linha.slice(10, 15)}.${linha.slice(15, 21)} ${linha.slice(21, 26)}.${linha.slice(26, 32)} ${linha[32]} ${linha.slice(33)}`;
}

/** The fields of a valid barcode; the due date is read relative to `referenceDate`. */
export function parseBarcode(barcode: string, referenceDate: string): BarcodeFields & { currency: string } {
  if (!isValidBarcode(barcode)) throw new RangeError('not a valid boleto barcode');
  return {
    bankCode: barcode.slice(0, 3),
    currency: barcode[3]!,
    dueDate: dueDateFromFactor(Number(barcode.slice(5, 9)), referenceDate),
    amountCents: Number(barcode.slice(9, 19)),
    freeField: barcode.slice(19),
  };
}
