/**
 * X-Key-Case support: request keys arrive in camelCase and are read as snake_case; response keys
 * leave in camelCase. Only object keys change, never values.
 */
export function camelToSnake(key: string): string {
  return key.replace(/[A-Z]/g, (c, i: number) => (i === 0 ? c.toLowerCase() : `_${c.toLowerCase()}`));
}

export function snakeToCamel(key: string): string {
  return key.replace(/_([a-z0-9])/g, (_, c: string) => c.toUpperCase());
}

/** A copy of `value` with every object key (at every depth) passed through `convert`. */
export function convertKeys(value: unknown, convert: (key: string) => string): unknown {
  if (Array.isArray(value)) return value.map((v) => convertKeys(v, convert));
  if (value !== null && typeof value === 'object' && !(value instanceof Date) && !Buffer.isBuffer(value)) {
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(value as Record<string, unknown>)) out[convert(k)] = convertKeys(v, convert);
    return out;
  }
  return value;
}
