import { ConfigError, type Config } from '../config.js';
import type { Database } from './db.js';
import { openPglite } from './pglite.js';
import { openPostgres, pooledSettingsMismatch, type PostgresOptions } from './postgres.js';

/** PostgreSQL when DATABASE_URL is set, the embedded PGlite in DATA_DIR otherwise. */
export function openDatabase(config: Pick<Config, 'databaseUrl' | 'dataDir' | 'db'>): Promise<Database> {
  if (config.databaseUrl !== undefined) {
    return openPostgres({
      url: config.databaseUrl,
      pooler: config.db.pooler,
      ...(config.db.listenUrl !== undefined ? { listenUrl: config.db.listenUrl } : {}),
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

/** The read replica's pool (DATABASE_READ_URL): as the primary's, through the same kind of pooler. */
export function readReplicaOptions(config: Pick<Config, 'databaseUrl' | 'db'>): PostgresOptions & { maxLagMs: number } {
  return {
    url: config.db.readUrl!,
    pooler: config.db.pooler,
    max: config.db.poolMax,
    statementTimeoutMs: config.db.statementTimeoutMs,
    lockTimeoutMs: config.db.lockTimeoutMs,
    idleInTransactionTimeoutMs: config.db.idleInTransactionTimeoutMs,
    maxLagMs: config.db.readMaxLagMs,
  };
}

/**
 * Behind a pooler the timeouts are the role's settings, not the connection's: checks through the
 * pooler that they are what the configuration says. Production refuses to start on a difference
 * (a statement_timeout of 0 lets one stuck statement hold a pooled connection for ever); other
 * environments log it. Nothing to check without a pooler (pixgate sets them at connect).
 */
export async function checkPooledSettings(
  db: Database,
  config: Pick<Config, 'databaseUrl' | 'db' | 'appEnv'>,
  log: { warn(obj: object, msg: string): void },
): Promise<void> {
  if (config.databaseUrl === undefined || config.db.pooler === 'none' || db.dialect !== 'postgres') return;
  const wrong = await pooledSettingsMismatch(db, config.db);
  if (wrong.length === 0) return;
  const message = `DATABASE_POOLER=${config.db.pooler}: the role's settings through the pooler differ from the configuration (${wrong.join('; ')}); set them with ALTER ROLE … SET (docs/deploy-database.md)`;
  if (config.appEnv === 'production') throw new ConfigError(message);
  log.warn({ mismatched: wrong }, message);
}
