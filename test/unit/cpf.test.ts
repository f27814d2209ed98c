import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { cpfCheckDigits, cpfProblem, isValidCnpj, isValidCpf } from '../../src/lib/documents.js';

const nineDigits = fc.stringMatching(/^\d{9}$/).filter((s) => !/^(\d)\1{8}$/.test(s));
const validCpf = nineDigits.map((nine) => nine + cpfCheckDigits(nine)).filter((d) => !/^(\d)\1{10}$/.test(d));

describe('CPF', () => {
  it('known valid and invalid numbers', () => {
    expect(isValidCpf('529.982.247-25')).toBe(true);
    expect(isValidCpf('52998224725')).toBe(true);
    expect(cpfProblem('52998224724')).toBe('invalid_check_digits');
    expect(cpfProblem('111.111.111-11')).toBe('repeated_digits');
    expect(cpfProblem('5299822472')).toBe('wrong_length');
    expect(cpfProblem('529.982.247-2X')).toBe('invalid_characters');
    expect(cpfProblem('529-982-247.25')).toBe('invalid_characters');
  });

  it('every generated valid CPF validates, with and without punctuation (property)', () => {
    fc.assert(
      fc.property(validCpf, (cpf) => {
        expect(isValidCpf(cpf)).toBe(true);
        expect(isValidCpf(`${cpf.slice(0, 3)}.${cpf.slice(3, 6)}.${cpf.slice(6, 9)}-${cpf.slice(9)}`)).toBe(true);
      }),
    );
  });

  // The CPF's mod-11 check maps remainders 0 and 1 both to the digit 0, so it has a known blind
  // spot: a change that only moves a remainder between 0 and 1 keeps the check digits. Example:
  // 20462168301 and 10462168301 are both valid. The property below is the exact truth: a
  // single-digit change is refused unless it stays inside that blind spot.
  const remainders = (d: string) => {
    const s1 = [10, 9, 8, 7, 6, 5, 4, 3, 2].reduce((a, w, i) => a + w * Number(d[i]), 0);
    const s2 = [11, 10, 9, 8, 7, 6, 5, 4, 3, 2].reduce((a, w, i) => a + w * Number(d[i]), 0);
    return [s1 % 11, s2 % 11] as const;
  };
  const lowRemainder = (r: number | undefined) => r === 0 || r === 1;

  it('a single-digit change is refused, except inside the mod-11 remainder 0/1 blind spot (property)', () => {
    fc.assert(
      fc.property(validCpf, fc.nat(10), fc.integer({ min: 1, max: 9 }), (cpf, position, delta) => {
        const digit = (Number(cpf[position]) + delta) % 10;
        const changed = cpf.slice(0, position) + digit + cpf.slice(position + 1);
        if (!isValidCpf(changed)) return;
        // Accepted: only possible in the blind spot, and never for a change of a check digit.
        expect(position).toBeLessThan(9);
        const [a1, a2] = remainders(cpf);
        const [b1, b2] = remainders(changed);
        expect([a1, b1].every(lowRemainder)).toBe(true);
        expect(a2 === b2 || [a2, b2].every(lowRemainder)).toBe(true);
      }),
      { numRuns: 2000 },
    );
  });

  it('the blind spot exists (so the property above is not vacuous) and changes of check digits are always caught', () => {
    expect(isValidCpf('20462168301')).toBe(true);
    expect(isValidCpf('10462168301')).toBe(true);
    fc.assert(
      fc.property(validCpf, fc.integer({ min: 9, max: 10 }), fc.integer({ min: 1, max: 9 }), (cpf, position, delta) => {
        const changed = cpf.slice(0, position) + ((Number(cpf[position]) + delta) % 10) + cpf.slice(position + 1);
        expect(isValidCpf(changed)).toBe(false);
      }),
    );
  });

  it('CNPJ check digits', () => {
    expect(isValidCnpj('11.222.333/0001-81')).toBe(true);
    expect(isValidCnpj('11222333000182')).toBe(false);
    expect(isValidCnpj('00000000000000')).toBe(false);
  });
});
