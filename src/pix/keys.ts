import { normalizeCnpj, normalizeCpf } from '../lib/documents.js';
import { UUID_V4 } from '../lib/ids.js';
import { PIX_KEY_TYPES, type PixKeyType } from '../rail/rail.js';

/** PIX key types of the directory (DICT): the rail port's vocabulary (src/rail/rail.ts). */
export { PIX_KEY_TYPES, type PixKeyType };

const EMAIL = /^[A-Za-z0-9.!#$%&'*+/=?^_`{|}~-]+@[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)+$/;
/**
 * A Brazilian PIX phone key (the directory's rule): `+55`, a two-digit area code (DDD, no zero),
 * then 8 digits (fixed line) or 9 digits starting with 9 (mobile).
 */
const BR_PHONE = /^\+55[1-9][1-9](?:9\d{8}|\d{8})$/;
/** What a phone number may be written with: digits, one leading `+`, spaces, dots, dashes, parentheses. */
const PHONE_SPELLING = /^\+?[\d\s().-]+$/;

/**
 * A key in the directory's canonical form for its type, or null if it is not a valid key of that
 * type: CPF 11 digits and CNPJ 14 characters (numeric or alphanumeric, letters upper-cased) with valid
 * check digits (the usual punctuation removed; lib/documents.ts), e-mail
 * lower-cased (at most 77 characters), phone in E.164 (`+5511987654321`), EVP a lower-case UUID v4.
 */
export function normalizePixKey(type: PixKeyType, raw: string): string | null {
  const key = raw.trim();
  switch (type) {
    case 'cpf':
      return /\s/.test(key) ? null : normalizeCpf(key.replace(/[.\-]/g, ''));
    case 'cnpj':
      return /\s/.test(key) ? null : normalizeCnpj(key);
    case 'email':
      return key.length <= 77 && EMAIL.test(key) ? key.toLowerCase() : null;
    case 'phone':
      return normalizePhone(key);
    case 'evp':
      return UUID_V4.test(key) ? key.toLowerCase() : null;
  }
}

/**
 * The one phone-key normaliser (cash-out keys, keys registered by the operator and the sandbox,
 * BR Codes): the canonical `+55DDNNNNNNNNN`, or null. Spaces, dots, dashes and parentheses are
 * removed; a number written without the country code (area code + 8 or 9 digits, 10 or 11 digits)
 * gets `+55`, and 12 or 13 digits starting with 55 are read as already carrying it. Anything that
 * is not then `+55` + area code + 8 or 9 digits (other countries, area code 0x) is refused.
 */
export function normalizePhone(raw: string): string | null {
  const key = raw.trim();
  if (!PHONE_SPELLING.test(key)) return null;
  const digits = key.replace(/\D/g, '');
  let e164: string;
  if (key.startsWith('+')) e164 = `+${digits}`;
  else if (digits.length === 10 || digits.length === 11) e164 = `+55${digits}`;
  else if ((digits.length === 12 || digits.length === 13) && digits.startsWith('55')) e164 = `+${digits}`;
  else return null;
  return BR_PHONE.test(e164) ? e164 : null;
}

export type KeyTypeDetection = { type: PixKeyType } | { ambiguous: true } | { invalid: true };

/**
 * The key type of a key sent without `pix_key_type`. Eleven digits could be a CPF or a phone number
 * without country code, so they are ambiguous (the spec's `pix_key_ambiguous`).
 */
export function detectPixKeyType(raw: string): KeyTypeDetection {
  const key = raw.trim();
  if (/^\d{11}$/.test(key)) return { ambiguous: true };
  if (/^\d{14}$/.test(key) || /^\d{2}\.\d{3}\.\d{3}\/\d{4}-\d{2}$/.test(key)) return { type: 'cnpj' };
  // An alphanumeric CNPJ (July 2026): 12 letters or digits with at least one letter, 2 digits.
  if (/^(?=.*[A-Za-z])[0-9A-Za-z]{12}\d{2}$/.test(key) || /^(?=.*[A-Za-z])[0-9A-Za-z]{2}\.[0-9A-Za-z]{3}\.[0-9A-Za-z]{3}\/[0-9A-Za-z]{4}-\d{2}$/.test(key)) return { type: 'cnpj' };
  if (/^\d{3}\.\d{3}\.\d{3}-\d{2}$/.test(key)) return { type: 'cpf' };
  if (key.includes('@')) return { type: 'email' };
  if (UUID_V4.test(key)) return { type: 'evp' };
  // Any other spelling of a number (`+55 11 98765-4321`, `(11) 98765-4321`, `11 98765-4321`,
  // 10, 12 or 13 digits) is a phone; whether it is a valid one is normalizePhone's answer.
  if (PHONE_SPELLING.test(key) && (key.startsWith('+') || [10, 11, 12, 13].includes(key.replace(/\D/g, '').length))) return { type: 'phone' };
  return { invalid: true };
}

/**
 * The PIX key a BR Code carries (field 26-01), in canonical form with its type, or null if it is
 * not a valid key. Inside a BR Code a phone key is written in E.164 (`+55…`), so 11 digits are a CPF.
 */
export function brCodeKey(raw: string): { key: string; type: PixKeyType } | null {
  const detected: KeyTypeDetection = /^\d{11}$/.test(raw.trim()) ? { type: 'cpf' } : detectPixKeyType(raw);
  if (!('type' in detected)) return null;
  const key = normalizePixKey(detected.type, raw);
  return key === null ? null : { key, type: detected.type };
}
