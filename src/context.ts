import type { Redis } from 'ioredis';
import type { Logger } from 'pino';
import type { Config } from './config.js';
import type { Database } from './db/db.js';
import type { Clock } from './lib/clock.js';
import type { BackgroundWorker } from './lib/worker.js';
import type { CredentialCache } from './auth/credentialCache.js';
import type { NonceStore } from './auth/nonceStore.js';
import type { IdempotencyStore } from './external/idempotency.js';
import type { Rail } from './rail/rail.js';
import type { FixedWindowCounter } from './ratelimit/fixedWindow.js';
import type { Metrics } from './metrics/metrics.js';

/**
 * Everything the HTTP layer and the domains depend on, built once at start (composition root in
 * server.ts; tests build their own with test databases).
 */
export interface AppContext {
  config: Config;
  db: Database;
  /**
   * Reads that tolerate bounded staleness (statement, transaction list, exports): the replica of
   * DATABASE_READ_URL while its lag is within DATABASE_READ_MAX_LAG_MS, else `db`
   * (src/db/replica.ts). Never for the money path.
   */
  readDb: Database;
  /** Set when REDIS_URL or REDIS_SENTINELS is configured. */
  redis: Redis | undefined;
  /**
   * The business clock: every deadline pixgate owns (charge expiry, MED, refunds, boletos,
   * idempotency and retention windows, webhook retries, the rail simulator). Outside production it
   * runs ahead of the wall clock by the sandbox offset (src/lib/sandboxClock.ts).
   */
  clock: Clock;
  /** Real time, never moved by the sandbox clock: security windows (signature timestamps, nonces, key lifetimes, sessions, rate limits). */
  wallClock: Clock;
  log: Logger;
  rail: Rail;
  /** Name this institution goes by in the directory and on receipts. */
  institutionName: string;
  workers: BackgroundWorker[];
  /** Fixed-window rate-limit counters: Redis when configured, process memory otherwise. */
  rateCounter: FixedWindowCounter;
  /** Signature-v2 nonces: Redis when configured, process memory otherwise; recorded in the database too (DurableNonces). */
  nonces: NonceStore;
  idempotency: IdempotencyStore;
  /** API keys and central keys read for authentication, invalidated by NOTIFY (src/auth/credentialCache.ts). */
  credentials: CredentialCache;
  /** Operational metrics of this process (src/metrics). */
  metrics: Metrics;
}
