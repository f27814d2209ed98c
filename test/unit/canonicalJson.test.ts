import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { canonicalize, canonicalStringify, CanonicalJsonError } from '../../src/lib/canonicalJson.js';
import { jsonObject, leaves, mutateLeaf, variantText } from '../helpers/jsonVariants.js';

describe('canonical JSON', () => {
  it('sorts keys at every depth, compact, raw UTF-8', () => {
    expect(canonicalize('{ "b": 1, "a": { "d": [ 1 , 2 ], "c": "é" } }')).toBe('{"a":{"c":"é","d":[1,2]},"b":1}');
  });

  it('normalizes equivalent escapes and leaves string contents alone', () => {
    expect(canonicalize('{"u":"\\u00e9\\/x","s":"a: b, c","q":"\\"","c":"\\u0001\\n"}')).toBe('{"c":"\\u0001\\n","q":"\\"","s":"a: b, c","u":"é/x"}');
    expect(canonicalize('{"e":"\\uD83D\\uDE00"}')).toBe('{"e":"😀"}');
  });

  it('keeps number text as sent', () => {
    expect(canonicalize('{"a":100.0,"b":1e2,"c":-0,"d":12345678901234567890}')).toBe('{"a":100.0,"b":1e2,"c":-0,"d":12345678901234567890}');
  });

  it('sorts keys by code point, as Python sort_keys does', () => {
    expect(canonicalize('{"\uffff":1,"\u{1F600}":2,"a":3,"B":4}')).toBe('{"B":4,"a":3,"\uffff":1,"\u{1F600}":2}');
  });

  it('a repeated key keeps its last value', () => {
    expect(canonicalize('{"a":1,"b":2,"a":3}')).toBe('{"a":3,"b":2}');
  });

  it('refuses what is not JSON', () => {
    for (const bad of ['', '{', '{"a":1,}', "{'a':1}", '{"a":01}', '{"a":1} x', '[1,]', '{"a":"\u0001"}', '{"a":"\\x"}', 'NaN', '{"a":.5}']) {
      expect(() => canonicalize(bad), bad).toThrow(CanonicalJsonError);
    }
  });

  it('agrees with JSON.stringify of the sorted value (property)', () => {
    // Reference order: compare arrays of code points.
    const cp = (s: string) => Array.from(s, (c) => c.codePointAt(0)!);
    const cmp = (a: string, b: string) => {
      const x = cp(a);
      const y = cp(b);
      for (let i = 0; i < Math.min(x.length, y.length); i++) if (x[i] !== y[i]) return x[i]! - y[i]!;
      return x.length - y.length;
    };
    const stringifySorted = (v: unknown): string => {
      if (Array.isArray(v)) return `[${v.map(stringifySorted).join(',')}]`;
      if (v !== null && typeof v === 'object') {
        return `{${Object.keys(v).sort(cmp).map((k) => `${JSON.stringify(k)}:${stringifySorted((v as Record<string, unknown>)[k])}`).join(',')}}`;
      }
      return JSON.stringify(v);
    };
    fc.assert(
      fc.property(jsonObject, (obj) => {
        expect(canonicalStringify(obj)).toBe(stringifySorted(obj));
      }),
    );
  });

  it('every key order, whitespace and escape variant has the same canonical form (property)', () => {
    fc.assert(
      fc.property(jsonObject, fc.integer(), (obj, seed) => {
        let x = seed >>> 0 || 1;
        const rand = () => ((x = (x * 1103515245 + 12345) >>> 0) % 1_000_000) / 1_000_000;
        expect(canonicalize(variantText(obj, rand))).toBe(canonicalStringify(obj));
      }),
    );
  });

  it('changing any one string or number value changes the canonical form (property)', () => {
    fc.assert(
      fc.property(jsonObject, fc.nat(), (obj, pick) => {
        const paths = leaves(obj);
        fc.pre(paths.length > 0);
        const mutated = mutateLeaf(obj, paths[pick % paths.length]!);
        expect(canonicalStringify(mutated)).not.toBe(canonicalStringify(obj));
      }),
    );
  });
});
