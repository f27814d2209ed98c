import type { Logger } from 'pino';
import type { Config } from '../config.js';
import type { Database } from '../db/db.js';
import type { Clock } from '../lib/clock.js';
import type { Metrics } from '../metrics/metrics.js';
import type { Rail } from '../rail/rail.js';

/**
 * What the money domains (pix, tef, med) use of the application's wiring, declared here and not
 * taken from src/context.ts: AppContext satisfies each of these structurally, so the edge passes
 * its `ctx` unchanged, and a test or a worker can pass just these.
 */

/** The configuration the money domains read. */
export type PixConfig = Pick<Config, 'institutionIspb'>;

/**
 * What a function that runs inside its caller's transaction uses besides the transaction: the
 * time, the log, and this institution's identity (ISPB, name) for the records it writes.
 */
export interface TxDeps {
  clock: Clock;
  log: Logger;
  config: PixConfig;
  institutionName: string;
}

/** What an operation uses that opens its own transactions and calls the rail. */
export interface PixDeps extends TxDeps {
  db: Database;
  rail: Rail;
}

/** The cash-out also reports its batches (`pixgate_batch_*`). */
export interface CashOutDeps extends PixDeps {
  metrics: Pick<Metrics, 'batchObserver'>;
}
