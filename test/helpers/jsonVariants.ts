import fc from 'fast-check';

/** Arbitrary JSON objects rich in what canonicalization must get right. */
export const jsonValue = fc.letrec((tie) => ({
  value: fc.oneof(
    { maxDepth: 4 },
    fc.constantFrom(null, true, false),
    fc.integer({ min: -1e12, max: 1e12 }),
    fc.double({ noNaN: true, noDefaultInfinity: true, min: -1e9, max: 1e9 }).filter((d) => !Object.is(d, -0)),
    fc.string({ unit: 'grapheme', maxLength: 12 }),
    fc.constantFrom(': ', ', ', '\\', '"', '/', '\u00e9', '\u2028', '\n\t', '{"a":1}', '\u{1F600}', '\u0000', '\u007f'),
    tie('array'),
    tie('object'),
  ),
  array: fc.array(tie('value'), { maxLength: 4 }),
  object: fc.dictionary(fc.string({ unit: 'grapheme', maxLength: 8 }), tie('value'), { maxKeys: 5 }),
}));

export const jsonObject = fc.dictionary(fc.string({ unit: 'grapheme', maxLength: 8 }), jsonValue.value, { minKeys: 1, maxKeys: 6 });

/** A JSON text of `value` with keys in a shuffled order, random whitespace and random equivalent escapes. */
export function variantText(value: unknown, rand: () => number): string {
  const ws = () => ['', ' ', '\n', '\t', '  ', '\r\n'][Math.floor(rand() * 6)]!;
  const str = (s: string) => {
    let out = '"';
    for (const ch of s) {
      const code = ch.codePointAt(0)!;
      if (ch === '"') out += '\\"';
      else if (ch === '\\') out += '\\\\';
      else if (code < 0x20) out += `\\u${code.toString(16).padStart(4, '0')}`;
      else if (ch === '/' && rand() < 0.5) out += '\\/';
      else if (code < 0x10000 && rand() < 0.3) out += `\\u${code.toString(16).padStart(4, rand() < 0.5 ? '0' : '0').toUpperCase()}`;
      else out += ch;
    }
    return `${out}"`;
  };
  const go = (v: unknown): string => {
    if (Array.isArray(v)) return `[${ws()}${v.map((x) => go(x)).join(`${ws()},${ws()}`)}${ws()}]`;
    if (v !== null && typeof v === 'object') {
      const keys = Object.keys(v as object);
      for (let i = keys.length - 1; i > 0; i--) {
        const j = Math.floor(rand() * (i + 1));
        [keys[i], keys[j]] = [keys[j]!, keys[i]!];
      }
      return `{${ws()}${keys.map((k) => `${str(k)}${ws()}:${ws()}${go((v as Record<string, unknown>)[k])}`).join(`${ws()},${ws()}`)}${ws()}}`;
    }
    if (typeof v === 'string') return str(v);
    return JSON.stringify(v);
  };
  return go(value);
}

/** Paths to the string and number leaves of a value. */
export function leaves(value: unknown, path: (string | number)[] = []): (string | number)[][] {
  if (Array.isArray(value)) return value.flatMap((v, i) => leaves(v, [...path, i]));
  if (value !== null && typeof value === 'object') return Object.entries(value).flatMap(([k, v]) => leaves(v, [...path, k]));
  return typeof value === 'string' || typeof value === 'number' ? [path] : [];
}

/** A copy of `value` with the leaf at `path` changed by one character (string) or digit (number). */
export function mutateLeaf(value: unknown, path: (string | number)[]): unknown {
  const copy = structuredClone(value) as Record<string | number, unknown>;
  let parent: Record<string | number, unknown> = copy;
  for (const p of path.slice(0, -1)) parent = parent[p] as Record<string | number, unknown>;
  const last = path[path.length - 1]!;
  const leaf = parent[last];
  if (typeof leaf === 'string') {
    parent[last] = leaf.length === 0 ? 'x' : (leaf[0] === 'a' ? 'b' : 'a') + leaf.slice(1);
  } else if (typeof leaf === 'number') {
    parent[last] = leaf + 1;
  }
  return copy;
}
