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

  it('any single-digit change of a valid CPF makes it invalid (property)', () => {
    fc.assert(
      fc.property(validCpf, fc.nat(10), fc.integer({ min: 1, max: 9 }), (cpf, position, delta) => {
        const digit = (Number(cpf[position]) + delta) % 10;
        const changed = cpf.slice(0, position) + digit + cpf.slice(position + 1);
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
