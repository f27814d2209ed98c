import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { camelToSnake, convertKeys, snakeToCamel } from '../../src/lib/keyCase.js';

describe('key case', () => {
  it('converts the spec’s field names both ways', () => {
    for (const [snake, camel] of [
      ['pix_key', 'pixKey'],
      ['end_to_end_id', 'endToEndId'],
      ['original_e2e_id', 'originalE2eId'],
      ['x_ratelimit_remaining', 'xRatelimitRemaining'],
      ['amount', 'amount'],
    ]) {
      expect(snakeToCamel(snake!)).toBe(camel);
      expect(camelToSnake(camel!)).toBe(snake);
    }
  });

  it('round-trips snake_case identifiers (property)', () => {
    const word = fc.stringMatching(/^[a-z][a-z0-9]{0,6}$/);
    fc.assert(
      fc.property(fc.array(word, { minLength: 1, maxLength: 4 }), (words) => {
        const snake = words.join('_');
        fc.pre(!/_\d/.test(snake));
        expect(camelToSnake(snakeToCamel(snake))).toBe(snake);
      }),
    );
  });

  it('converts keys at every depth and never values', () => {
    expect(convertKeys({ a_b: [{ c_d: 'e_f' }], g: { h_i: null } }, snakeToCamel)).toEqual({ aB: [{ cD: 'e_f' }], g: { hI: null } });
  });
});
