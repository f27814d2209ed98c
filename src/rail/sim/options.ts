import type { Logger } from 'pino';
import type { Database } from '../../db/db.js';
import type { BatchObserver } from '../../lib/batcher.js';
import type { Clock } from '../../lib/clock.js';

/** What the simulated central bank is built with (src/rail/sim/simulatedRail.ts), shared by its parts. */
export interface SimulatorOptions {
  db: Database;
  institutionIspb: string;
  institutionName: string;
  clock: Clock;
  log: Logger;
  /** SIM_SETTLEMENT_MS: delay between acceptance and the outcome of a payment or return. */
  settlementMs: number;
  /** SIM_PROTECTION_MS: how long a protection-queued payment waits before it is reprocessed. */
  protectionMs: number;
  /** SIM_SEED. */
  seed: number;
  /**
   * The engine's safety-net poll (at least 1 s; default 5 s on the system clock, 1 s on a test
   * clock): it wakes when work this process queued is due; the poll only finds work of other
   * (dead) processes, leases that ran out, and work falling due on a clock a test moves by hand.
   */
  pollMs?: number;
  /** Named observers of its batched calls (metrics: `sim_lookup`, `sim_order`). */
  observeBatch?: (name: string) => BatchObserver;
}

/** The answer of a sandbox control: its value, or why it was refused (the sandbox routes map the reason). */
export type SandboxOutcome<T = void> = { ok: true; value: T } | { ok: false; reason: 'not_found' | 'conflict' | 'unprocessable'; detail: string };

/** Look-ups and payment orders gathered into one statement (src/lib/batcher.ts), and such statements at once. */
export const CALL_BATCH = 100;
export const CALLS_IN_FLIGHT = 2;

/** The Batcher options of one batched call: its size bounds and, when metrics are on, its observer. */
export function batchOptions(options: SimulatorOptions, name: string): { maxBatch: number; maxInFlight: number; observe?: BatchObserver } {
  return { maxBatch: CALL_BATCH, maxInFlight: CALLS_IN_FLIGHT, ...(options.observeBatch ? { observe: options.observeBatch(name) } : {}) };
}
