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
    '{"lone":"\\udfff"}',
    '{"\\ud800":1}',
    '{"pair":"\\ud83d\\ude00"}',
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

describe('parseJson: strings PostgreSQL cannot store are refused', () => {
  it('U+0000 and unpaired surrogates, in values and keys, at any depth; a surrogate pair is a character', () => {
    const nul = 'Request body strings must not contain the character U+0000';
    const lone = 'Request body strings must not contain an unpaired UTF-16 surrogate';
    const cases: [string, string][] = [
      ['{"a":"x\\u0000"}', nul],
      ['{"a\\u0000":1}', nul],
      ['{"a":"\\udfff"}', lone],
      ['{"a":"\\ud800"}', lone],
      ['{"a":"\\ude00\\ud83d"}', lone],
      ['{"a":[{"b":"x\\ud83d"}]}', lone],
      ['{"\\udc00":1}', lone],
      ['"\\ud800\\u0000"', nul],
    ];
    for (const [text, message] of cases) expect(() => parseJson(text), text).toThrow(expect.objectContaining({ name: 'JsonContentError', message }));
    expect(parseJson('{"a":"\\ud83d\\ude00\\u00e9"}')).toEqual({ a: '\u{1F600}\u00e9' });
    expect(parseJson('{"a":"\u{1F600}"}')).toEqual({ a: '\u{1F600}' });
  });
});
