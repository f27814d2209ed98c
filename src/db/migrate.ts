import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { packageRoot } from '../lib/paths.js';
import type { Database } from './db.js';

export const migrationsDir = join(packageRoot, 'migrations');

export interface Migration {
  name: string;
  sql: string;
}

/** Plain SQL files `NNNN_name.sql`, applied in name order, forward only. */
export function loadMigrations(dir = migrationsDir): Migration[] {
  return readdirSync(dir)
    .filter((f) => /^\d{4}_[a-z0-9_]+\.sql$/.test(f))
    .sort()
    .map((name) => ({ name, sql: readFileSync(join(dir, name), 'utf8') }));
}

// Any constant: every pixgate process migrating the same database takes this advisory lock.
const MIGRATION_LOCK = 7_245_101;

/**
 * Applies the migrations not yet recorded in `schema_migrations`, all in one transaction under an
 * advisory lock, so processes starting together on one PostgreSQL apply each file exactly once.
 * Returns the names applied.
 */
export async function migrate(db: Database, migrations = loadMigrations()): Promise<string[]> {
  return db.transaction(async (tx) => {
    await tx.query('SELECT pg_advisory_xact_lock($1)', [MIGRATION_LOCK]);
    await tx.query(
      `CREATE TABLE IF NOT EXISTS schema_migrations (
         name text PRIMARY KEY,
         applied_at timestamptz NOT NULL DEFAULT now()
       )`,
    );
    const done = new Set(
      (await tx.query<{ name: string }>('SELECT name FROM schema_migrations')).map((r) => r.name),
    );
    const applied: string[] = [];
    for (const m of migrations) {
      if (done.has(m.name)) continue;
      // Each file may hold many statements; the simple query protocol runs them in this transaction.
      await tx.exec(m.sql);
      await tx.query('INSERT INTO schema_migrations (name) VALUES ($1)', [m.name]);
      applied.push(m.name);
    }
    return applied;
  });
}
