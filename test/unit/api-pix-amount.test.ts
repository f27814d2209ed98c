import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { centsToDecimal, decimalToCents, MAX_DECIMAL_CENTS } from '../../src/apiPix/amount.js';

describe('API Pix amounts: the standard’s decimal strings ⇄ pixgate’s cents, by string work', () => {
  it('round-trips every amount the standard can write', () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: MAX_DECIMAL_CENTS }), (cents) => {
        const text = centsToDecimal(cents);
        expect(text).toMatch(/^\d{1,10}\.\d{2}$/);
        expect(decimalToCents(text)).toBe(cents);
      }),
      { numRuns: 2000 },
    );
  });

  it('reads every text of the pattern \\d{1,10}\\.\\d{2} digit for digit (no floating point)', () => {
    const digits = (min: number, max: number) => fc.array(fc.constantFrom(...'0123456789'), { minLength: min, maxLength: max }).map((d) => d.join(''));
    fc.assert(
      fc.property(digits(1, 10), digits(2, 2), (int, frac) => {
        const cents = decimalToCents(`${int}.${frac}`);
        expect(cents).toBe(Number(BigInt(int) * 100n + BigInt(frac)));
        expect(centsToDecimal(cents!)).toBe(`${BigInt(int)}.${frac}`);
      }),
      { numRuns: 2000 },
    );
  });

  it('the amounts floating point gets wrong are exact', () => {
    expect(decimalToCents('0.29')).toBe(29); // 0.29 * 100 = 28.999999999999996
    expect(decimalToCents('1.15')).toBe(115); // 1.15 * 100 = 114.99999999999999
    expect(decimalToCents('9999999999.99')).toBe(999_999_999_999);
    expect(centsToDecimal(5)).toBe('0.05');
    expect(centsToDecimal(0)).toBe('0.00');
  });

  it('refuses what is not of the pattern', () => {
    for (const text of ['12', '12.3', '12.345', '.50', '1,00', '-1.00', '+1.00', '1e2', ' 1.00', '1.00 ', '12345678901.00', '１.００', '']) {
      expect(decimalToCents(text)).toBeNull();
    }
    expect(() => centsToDecimal(MAX_DECIMAL_CENTS + 1)).toThrow(RangeError);
    expect(() => centsToDecimal(-1)).toThrow(RangeError);
    expect(() => centsToDecimal(1.5)).toThrow(RangeError);
  });
});
