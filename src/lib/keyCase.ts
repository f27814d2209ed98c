import { isPlainObject } from './canonicalJson.js';

/**
 * X-Key-Case support: request keys arrive in camelCase and are read as snake_case; response keys
 * leave in camelCase. Only object keys change, never values.
 */
/**
 * Only identifier-like keys change (`pixKey` <-> `pix_key`); any other key (`__proto__`, `a-b`,
 * `_x`, `Amount`) passes through unchanged in both directions, so no two keys a client sends can
 * collapse into one and refused keys are reported as sent.
 */
const CAMEL = /^[a-z][a-zA-Z0-9]*$/;
const SNAKE = /^[a-z][a-z0-9]*(?:_[a-z0-9]+)*$/;

export function camelToSnake(key: string): string {
  if (!CAMEL.test(key)) return key;
  return key.replace(/[A-Z]/g, (c, i: number) => (i === 0 ? c.toLowerCase() : `_${c.toLowerCase()}`));
}

export function snakeToCamel(key: string): string {
  if (!SNAKE.test(key)) return key;
  return key.replace(/_([a-z0-9])/g, (_, c: string) => c.toUpperCase());
}

/**
 * A copy of `value` with every key of its plain objects (at every depth) passed through `convert`.
 * The copies have no prototype, so a key named `__proto__` is written as data, never as the
 * object's prototype. Other objects (dates, buffers, `JsonDecimal`s) are kept as they are.
 */
export function convertKeys(value: unknown, convert: (key: string) => string): unknown {
  if (Array.isArray(value)) return value.map((v) => convertKeys(v, convert));
  if (isPlainObject(value)) {
    const out = Object.create(null) as Record<string, unknown>;
    for (const k of Object.keys(value)) out[convert(k)] = convertKeys(value[k], convert);
    return out;
  }
  return value;
}

/** snake_case words outside double quotes (a quoted part is a value the client sent). */
const SNAKE_WORDS = /"[^"]*"|\b[a-z][a-z0-9]*(?:_[a-z0-9]+)+\b/g;

/**
 * An error text for a camelCase client: field names written in snake_case (`pix_key is required`,
 * `boleto.amount_cents`) become camelCase (`pixKey is required`), as the client spells them.
 * Quoted parts (values echoed back) are left alone.
 */
export function camelCaseText(text: string): string {
  return text.replace(SNAKE_WORDS, (word) => (word.startsWith('"') ? word : snakeToCamel(word)));
}

/** The parts of an error body that are prose (codes such as `code: 'invalid_amount'` are not). */
const TEXT_KEYS = new Set(['detail', 'message', 'errors']);

/**
 * `convertKeys(value, snakeToCamel)` for an error body, that also passes the prose under `detail`,
 * `message` and `errors` through camelCaseText.
 */
export function camelCaseErrorBody(value: unknown, prose = false): unknown {
  if (typeof value === 'string') return prose ? camelCaseText(value) : value;
  if (Array.isArray(value)) return value.map((v) => camelCaseErrorBody(v, prose));
  if (isPlainObject(value)) {
    const out = Object.create(null) as Record<string, unknown>;
    for (const k of Object.keys(value)) out[snakeToCamel(k)] = camelCaseErrorBody(value[k], prose || TEXT_KEYS.has(k));
    return out;
  }
  return value;
}
