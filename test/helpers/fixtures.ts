import { cnpjCheckDigits, cpfCheckDigits } from '../../src/lib/documents.js';

let counter = 0;

/** A valid CPF, different on each call. */
export function validCpf(): string {
  counter++;
  const nine = String(100_000_000 + ((counter * 7_919 + Math.floor(Math.random() * 1e6)) % 800_000_000)).slice(0, 9);
  const digits = nine + cpfCheckDigits(nine);
  return /^(\d)\1{10}$/.test(digits) ? validCpf() : digits;
}

/** A valid CNPJ, different on each call. */
export function validCnpj(): string {
  counter++;
  const eight = String(10_000_000 + ((counter * 104_729 + Math.floor(Math.random() * 1e6)) % 89_999_999)).slice(0, 8);
  const twelve = `${eight}0001`;
  return twelve + cnpjCheckDigits(twelve);
}
