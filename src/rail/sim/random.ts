import { cpfCheckDigits } from '../../lib/documents.js';
import { utcMinuteStamp } from '../../lib/ids.js';

const ALNUM = 'ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789';

/**
 * The simulator's only source of randomness: a seeded PRNG (mulberry32, 32-bit state), so a run
 * started with the same SIM_SEED draws the same ids and payers in the same order and a failing run
 * can be replayed. Not for anything secret.
 */
export class SeededRandom {
  private state: number;

  constructor(readonly seed: number) {
    this.state = seed >>> 0;
  }

  /** A float in [0, 1). */
  next(): number {
    this.state = (this.state + 0x6d2b79f5) >>> 0;
    let t = this.state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  }

  /** An integer in [0, n). */
  int(n: number): number {
    return Math.floor(this.next() * n);
  }

  pick<T>(items: readonly T[]): T {
    return items[this.int(items.length)]!;
  }

  alnum(n: number): string {
    let out = '';
    for (let i = 0; i < n; i++) out += ALNUM[this.int(ALNUM.length)];
    return out;
  }

  /** End-to-end id as the given institution would create it (contract section 2). */
  endToEndId(kind: 'E' | 'D', ispb: string, now: Date): string {
    return `${kind}${ispb}${utcMinuteStamp(now)}${this.alnum(11)}`;
  }

  /** A valid CPF. */
  cpf(): string {
    for (;;) {
      let nine = '';
      for (let i = 0; i < 9; i++) nine += String(this.int(10));
      if (!/^(\d)\1{8}$/.test(nine)) return nine + cpfCheckDigits(nine);
    }
  }
}

const FIRST_NAMES = ['Ana', 'Bruno', 'Carla', 'Diego', 'Elisa', 'Fábio', 'Gabriela', 'Heitor', 'Isabela', 'João', 'Larissa', 'Marcos'];
const LAST_NAMES = ['Silva', 'Santos', 'Oliveira', 'Souza', 'Lima', 'Pereira', 'Costa', 'Ferreira', 'Almeida', 'Ribeiro'];
/** Participants a simulated payer banks with (ISPBs known to src/lib/banks.ts). */
export const PAYER_ISPBS = ['00000000', '00360305', '60746948', '60701190', '90400888', '18236120', '00416968'] as const;

export interface SimulatedPayer {
  name: string;
  document: string;
  ispb: string;
}

/** A plausible payer of another institution: a person's name, a valid CPF, a known bank. */
export function randomPayer(random: SeededRandom): SimulatedPayer {
  return {
    name: `${random.pick(FIRST_NAMES)} ${random.pick(LAST_NAMES)} ${random.pick(LAST_NAMES)}`,
    document: random.cpf(),
    ispb: random.pick(PAYER_ISPBS),
  };
}
