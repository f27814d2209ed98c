import { isValidCnpj, isValidCpf } from '../lib/documents.js';
import { UUID_V4 } from '../lib/ids.js';

/** PIX key types of the directory (DICT). */
export const PIX_KEY_TYPES = ['cpf', 'cnpj', 'email', 'phone', 'evp'] as const;
export type PixKeyType = (typeof PIX_KEY_TYPES)[number];

const EMAIL = /^[A-Za-z0-9.!#$%&'*+/=?^_`{|}~-]+@[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)+$/;
const PHONE = /^\+[1-9]\d{7,14}$/;

/**
 * A key in the directory's canonical form for its type, or null if it is not a valid key of that
 * type: CPF 11 digits and CNPJ 14 digits with valid check digits (punctuation removed), e-mail
 * lower-cased (at most 77 characters), phone in E.164 (`+5511987654321`), EVP a lower-case UUID v4.
 */
export function normalizePixKey(type: PixKeyType, raw: string): string | null {
  const key = raw.trim();
  switch (type) {
    case 'cpf': {
      const digits = key.replace(/[.\-]/g, '');
      return /^\d{11}$/.test(digits) && isValidCpf(digits) ? digits : null;
    }
    case 'cnpj': {
      const digits = key.replace(/[.\-/]/g, '');
      return /^\d{14}$/.test(digits) && isValidCnpj(digits) ? digits : null;
    }
    case 'email':
      return key.length <= 77 && EMAIL.test(key) ? key.toLowerCase() : null;
    case 'phone':
      return normalizePhone(key);
    case 'evp':
      return UUID_V4.test(key) ? key.toLowerCase() : null;
  }
}

/**
 * A phone key in E.164. Spaces, dashes, dots and parentheses are removed; a Brazilian number
 * written without country code (area code + 8 or 9 digits) gets `+55`.
 */
function normalizePhone(raw: string): string | null {
  const compact = raw.replace(/[\s().-]/g, '');
  const e164 = /^\d{10,11}$/.test(compact) ? `+55${compact}` : compact;
  return PHONE.test(e164) ? e164 : null;
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
  if (/^\d{3}\.\d{3}\.\d{3}-\d{2}$/.test(key)) return { type: 'cpf' };
  if (key.includes('@')) return { type: 'email' };
  if (key.startsWith('+') || /^\(\d{2}\)/.test(key)) return { type: 'phone' };
  if (UUID_V4.test(key)) return { type: 'evp' };
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
