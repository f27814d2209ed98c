/**
 * Brazilian taxpayer documents: CPF (people, 11 digits) and CNPJ (companies, 14 characters).
 *
 * Since July 2026 the federal revenue issues alphanumeric CNPJs: 12 base characters of `0-9A-Z`
 * then 2 numeric check digits (`^[0-9A-Z]{12}[0-9]{2}$`; the all-digit CNPJs issued before stay
 * valid, they are the special case with no letter). Both check digits are modulo 11 over the
 * characters' values, a character's value being its ASCII code minus 48 ('0'..'9' → 0..9,
 * 'A'..'Z' → 17..42), with the weights 5,4,3,2,9,8,7,6,5,4,3,2 (first digit) and
 * 6,5,4,3,2,9,8,7,6,5,4,3,2 (second). For an all-digit CNPJ this is the old rule unchanged.
 *
 * `parseDocument` is the one reader every edge uses (PIX keys, merchants, payers, debtors, boletos,
 * the simulator's directory): it answers the canonical form (CPF 11 digits, CNPJ 14 upper-case
 * characters) or why the text is not a valid document.
 */

export type CpfProblem = 'wrong_length' | 'invalid_characters' | 'repeated_digits' | 'invalid_check_digits';
export type CnpjProblem = CpfProblem;
export type DocumentKind = 'cpf' | 'cnpj';

/** Digits of a CPF written with or without the usual punctuation (`123.456.789-09`); null otherwise. */
export function cpfDigits(input: string): string | null {
  const text = input.trim();
  if (/^\d{11}$/.test(text)) return text;
  if (/^\d{3}\.\d{3}\.\d{3}-\d{2}$/.test(text)) return text.replace(/\D/g, '');
  return null;
}

/** A character's value in the check-digit sums: its ASCII code minus 48 (digits 0..9, A..Z 17..42). */
function charValue(c: string): number {
  return c.charCodeAt(0) - 48;
}

function mod11Digit(chars: string, weights: number[]): number {
  const sum = weights.reduce((acc, w, i) => acc + w * charValue(chars[i]!), 0);
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

const CNPJ_WEIGHTS = [5, 4, 3, 2, 9, 8, 7, 6, 5, 4, 3, 2];

/** Check digits of the first twelve CNPJ characters (digits or upper-case letters). */
export function cnpjCheckDigits(twelve: string): string {
  const d1 = mod11Digit(twelve, CNPJ_WEIGHTS);
  const d2 = mod11Digit(twelve + d1, [6, ...CNPJ_WEIGHTS]);
  return `${d1}${d2}`;
}

/**
 * Why a CNPJ is invalid, or null when it is valid. Accepts the bare 14 characters or the usual
 * punctuation (`.`, `/`, `-` and spaces are ignored, as pixgate always read CNPJs), letters in either
 * case (a CNPJ's letters are upper case; lower case is read as upper).
 */
export function cnpjProblem(input: string): CnpjProblem | null {
  const text = input.trim();
  const bare = text.replace(/[.\-/\s]/g, '');
  if (!/^[0-9A-Za-z]*$/.test(bare)) return 'invalid_characters';
  if (bare.length !== 14) return 'wrong_length';
  const upper = bare.toUpperCase();
  if (!/^[0-9A-Z]{12}[0-9]{2}$/.test(upper)) return 'invalid_characters';
  if (/^(.)\1{13}$/.test(upper)) return 'repeated_digits';
  if (cnpjCheckDigits(upper.slice(0, 12)) !== upper.slice(12)) return 'invalid_check_digits';
  return null;
}

export function isValidCnpj(input: string): boolean {
  return cnpjProblem(input) === null;
}

/** The canonical CNPJ (14 upper-case characters) of a valid CNPJ in any accepted spelling; null otherwise. */
export function normalizeCnpj(input: string): string | null {
  return cnpjProblem(input) === null ? input.trim().replace(/[.\-/\s]/g, '').toUpperCase() : null;
}

/** The canonical CPF (11 digits) of a valid CPF in any accepted spelling; null otherwise. */
export function normalizeCpf(input: string): string | null {
  return cpfProblem(input) === null ? input.trim().replace(/[.\-\s]/g, '') : null;
}

export interface TaxDocument {
  kind: DocumentKind;
  /** Canonical form: CPF 11 digits, CNPJ 14 upper-case characters. */
  value: string;
}

export type DocumentReading = TaxDocument | { problem: CpfProblem; kind: DocumentKind | null };

/**
 * The one CPF-or-CNPJ reader. `canonical` (the strict spelling of the operator's and the sandbox's
 * APIs) accepts only the canonical form — 11 digits or 14 upper-case characters; otherwise the
 * usual punctuation (`.`, `/`, `-`, spaces: ignored wherever they stand, as pixgate always read
 * documents) and lower-case letters are accepted too. Eleven characters are a CPF, fourteen
 * a CNPJ; anything else is `wrong_length`.
 */
export function readDocument(input: string, options: { canonical?: boolean } = {}): DocumentReading {
  const text = input.trim();
  if (options.canonical && !/^(\d{11}|[0-9A-Z]{14})$/.test(text)) {
    return { problem: /^[0-9A-Z]*$/.test(text) ? 'wrong_length' : 'invalid_characters', kind: null };
  }
  const bare = text.replace(/[.\-/\s]/g, '');
  if (bare.length === 11 && /^\d+$/.test(bare)) {
    const problem = cpfProblem(bare);
    return problem === null ? { kind: 'cpf', value: bare } : { problem, kind: 'cpf' };
  }
  if (bare.length === 14) {
    const problem = cnpjProblem(bare);
    return problem === null ? { kind: 'cnpj', value: bare.toUpperCase() } : { problem, kind: 'cnpj' };
  }
  return { problem: /^[0-9A-Za-z]*$/.test(bare) ? 'wrong_length' : 'invalid_characters', kind: null };
}

/** The canonical form of a valid CPF or CNPJ, or null (see readDocument). */
export function normalizeDocument(input: string, options: { canonical?: boolean } = {}): string | null {
  const reading = readDocument(input, options);
  return 'value' in reading ? reading.value : null;
}

/** A CPF (11 digits) or CNPJ (14 characters, alphanumeric base), in canonical form, with valid check digits. */
export function isValidDocument(canonical: string): boolean {
  return normalizeDocument(canonical, { canonical: true }) === canonical;
}

/** The message the edges give for a document that is not a valid CPF or CNPJ. */
export function documentProblemMessage(reading: DocumentReading): string | null {
  if ('value' in reading) return null;
  if (reading.problem === 'invalid_check_digits' || reading.problem === 'repeated_digits') return 'has invalid check digits';
  return 'must be a CPF (11 digits) or a CNPJ (14 characters: 12 digits or upper-case letters and 2 check digits)';
}

/** The SQL pattern of a canonical document (CHECK constraints, migration 1100). */
export const DOCUMENT_PATTERN = '^([0-9]{11}|[0-9A-Z]{12}[0-9]{2})$';
