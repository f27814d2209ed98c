import { describe, expect, it } from 'vitest';
import { canonicalize, parseCanonical, parseJson } from '../../src/lib/canonicalJson.js';

/** The pipeline reads a signed body once (parseCanonical) where it read it twice (canonicalize, parseJson). */
describe('parseCanonical', () => {
  const texts = [
    '{"b":1,"a":[1,2,{"d":null,"c":true}]}',
    ' { "amount" : 100.0 , "x":"\\u00e9\\n" } ',
    '{"__proto__":{"x":1},"constructor":"c"}',
    '{"a":1,"a":2}',
    '[1e2, -0, 99.99999999999999999]',
    '"plain"',
    '{"nul":"a\\u0000b"}',
  ];
  it('gives canonicalize’s form and parseJson’s value from one parse, with the same errors', () => {
    for (const text of texts) {
      const once = parseCanonical(text);
      expect(once.canonical).toBe(canonicalize(text));
      let expected: unknown;
      let expectedError: unknown;
      try {
        expected = parseJson(text);
      } catch (err) {
        expectedError = err;
      }
      if (expectedError) expect(() => once.value()).toThrow((expectedError as Error).message);
      else expect(once.value()).toEqual(expected);
    }
    for (const bad of ['', '{', '{"a":1}x', "{'a':1}"]) expect(() => parseCanonical(bad)).toThrow(expect.objectContaining({ name: 'CanonicalJsonError' }));
  });
});
