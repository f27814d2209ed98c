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

/** A clock tests move by hand (`startTestServer({clock})`). */
export class ManualClock {
  constructor(private ms: number = Date.now()) {}
  now(): Date {
    return new Date(this.ms);
  }
  advance(ms: number): void {
    this.ms += ms;
  }
}

/** Polls `probe` until it returns a value other than undefined, or fails after `timeoutMs`. */
export async function eventually<T>(probe: () => Promise<T | undefined>, timeoutMs = 5000, what = 'condition'): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

/** A valid alphanumeric CNPJ (12 characters of 0-9A-Z with at least one letter, 2 check digits), different on each call. */
export function validAlphanumericCnpj(): string {
  counter++;
  const alphabet = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ';
  let base = String.fromCharCode(65 + (counter % 26));
  for (let i = 1; i < 12; i++) base += alphabet[Math.floor(Math.random() * alphabet.length)];
  return base + cnpjCheckDigits(base);
}
