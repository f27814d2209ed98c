/** Brazilian taxpayer documents: CPF (people, 11 digits) and CNPJ (companies, 14 digits). */

export type CpfProblem = 'wrong_length' | 'invalid_characters' | 'repeated_digits' | 'invalid_check_digits';

/** Digits of a CPF written with or without the usual punctuation (`123.456.789-09`); null otherwise. */
export function cpfDigits(input: string): string | null {
  const text = input.trim();
  if (/^\d{11}$/.test(text)) return text;
  if (/^\d{3}\.\d{3}\.\d{3}-\d{2}$/.test(text)) return text.replace(/\D/g, '');
  return null;
}

function mod11Digit(digits: string, weights: number[]): number {
  const sum = weights.reduce((acc, w, i) => acc + w * Number(digits[i]), 0);
  const rest = sum % 11;
  return rest < 2 ? 0 : 11 - rest;
}

/** Check digits of the first nine CPF digits. */
export function cpfCheckDigits(nine: string): string {
  const d1 = mod11Digit(nine, [10, 9, 8, 7, 6, 5, 4, 3, 2]);
  const d2 = mod11Digit(nine + d1, [11, 10, 9, 8, 7, 6, 5, 4, 3, 2]);
  return `${d1}${d2}`;
}

/** Why a CPF is invalid, or null when it is valid. Accepts digits with or without punctuation. */
export function cpfProblem(input: string): CpfProblem | null {
  const text = input.trim();
  const digitsOnly = text.replace(/[.\-\s]/g, '');
  if (!/^\d*$/.test(digitsOnly)) return 'invalid_characters';
  if (digitsOnly.length !== 11) return 'wrong_length';
  if (cpfDigits(text) === null) return 'invalid_characters';
  if (/^(\d)\1{10}$/.test(digitsOnly)) return 'repeated_digits';
  if (cpfCheckDigits(digitsOnly.slice(0, 9)) !== digitsOnly.slice(9)) return 'invalid_check_digits';
  return null;
}

export function isValidCpf(input: string): boolean {
  return cpfProblem(input) === null;
}

/** Check digits of the first twelve CNPJ digits. */
export function cnpjCheckDigits(twelve: string): string {
  const w1 = [5, 4, 3, 2, 9, 8, 7, 6, 5, 4, 3, 2];
  const d1 = mod11Digit(twelve, w1);
  const d2 = mod11Digit(twelve + d1, [6, ...w1]);
  return `${d1}${d2}`;
}

export function isValidCnpj(input: string): boolean {
  const digits = input.trim().replace(/[.\-/\s]/g, '');
  if (!/^\d{14}$/.test(digits) || /^(\d)\1{13}$/.test(digits)) return false;
  return cnpjCheckDigits(digits.slice(0, 12)) === digits.slice(12);
}

/** A CPF (11 digits) or CNPJ (14 digits), digits only, with valid check digits. */
export function isValidDocument(digits: string): boolean {
  if (/^\d{11}$/.test(digits)) return isValidCpf(digits);
  if (/^\d{14}$/.test(digits)) return isValidCnpj(digits);
  return false;
}
