import type { Config } from '../config.js';
import type { Database } from './db.js';
import { openPglite } from './pglite.js';
import { openPostgres } from './postgres.js';

/** PostgreSQL when DATABASE_URL is set, the embedded PGlite in DATA_DIR otherwise. */
export function openDatabase(config: Pick<Config, 'databaseUrl' | 'dataDir' | 'db'>): Promise<Database> {
  if (config.databaseUrl !== undefined) {
    return openPostgres({
      url: config.databaseUrl,
      max: config.db.poolMax,
      statementTimeoutMs: config.db.statementTimeoutMs,
      lockTimeoutMs: config.db.lockTimeoutMs,
      idleInTransactionTimeoutMs: config.db.idleInTransactionTimeoutMs,
    });
  }
  // PGlite has one connection and runs statements on the event loop: a statement timeout cannot
  // interrupt it, so the limits apply to PostgreSQL only.
  return openPglite({ dataDir: config.dataDir });
}
