import type { Config } from '../config.js';
import type { Database } from './db.js';
import { openPglite } from './pglite.js';
import { openPostgres } from './postgres.js';

/** PostgreSQL when DATABASE_URL is set, the embedded PGlite in DATA_DIR otherwise. */
export function openDatabase(config: Pick<Config, 'databaseUrl' | 'dataDir'>): Promise<Database> {
  if (config.databaseUrl !== undefined) return openPostgres({ url: config.databaseUrl });
  return openPglite({ dataDir: config.dataDir });
}
