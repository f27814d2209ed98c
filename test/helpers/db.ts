import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import pg from 'pg';
import { inject } from 'vitest';
import type { Database } from '../../src/db/db.js';
import { migrate } from '../../src/db/migrate.js';
import { openPglite, type PgliteDatabase } from '../../src/db/pglite.js';
import { openPostgres } from '../../src/db/postgres.js';

export type Backend = 'pglite' | 'postgres';

/** Storage-touching tests run on PGlite always and on PostgreSQL when TEST_DATABASE_URL is set. */
export const BACKENDS: Backend[] = process.env.TEST_DATABASE_URL ? ['pglite', 'postgres'] : ['pglite'];

let template: Blob | undefined;

export interface TestDatabase {
  db: Database;
  backend: Backend;
  close(): Promise<void>;
  /**
   * A process restart: closes this handle without destroying the data and opens a new one on it
   * (PGlite: a new instance from the data folder's dump; PostgreSQL: a new pool on the same schema).
   */
  reopen(): Promise<TestDatabase>;
}

function pgliteTestDatabase(db: PgliteDatabase): TestDatabase {
  return {
    db,
    backend: 'pglite',
    close: () => db.close(),
    async reopen() {
      const dataDir = await db.dump();
      await db.close();
      return pgliteTestDatabase(await openPglite({ dataDir: 'memory://', loadDataDir: dataDir }));
    },
  };
}

function postgresTestDatabase(url: string, schema: string, db: Database): TestDatabase {
  return {
    db,
    backend: 'postgres',
    async close() {
      await db.close();
      const c = new pg.Client({ connectionString: url });
      await c.connect();
      await c.query(`DROP SCHEMA ${schema} CASCADE`);
      await c.end();
    },
    async reopen() {
      await db.close();
      return postgresTestDatabase(url, schema, await openPostgres({ url, schema, max: 25 }));
    },
  };
}

/**
 * A fresh, migrated database of its own: an in-memory PGlite cloned from the run's template, or a
 * new schema on the PostgreSQL of TEST_DATABASE_URL (dropped on close). `poolMax`: connections of
 * the PostgreSQL pool (1 for a test that reads one connection's session state).
 */
export async function openTestDatabase(backend: Backend, options: { poolMax?: number } = {}): Promise<TestDatabase> {
  if (backend === 'pglite') {
    template ??= new Blob([readFileSync(inject('pgliteTemplate'))]);
    return pgliteTestDatabase(await openPglite({ dataDir: 'memory://', loadDataDir: template }));
  }
  const url = process.env.TEST_DATABASE_URL;
  if (!url) throw new Error('TEST_DATABASE_URL is not set');
  const schema = `t_${randomBytes(6).toString('hex')}`;
  const admin = new pg.Client({ connectionString: url });
  await admin.connect();
  await admin.query(`CREATE SCHEMA ${schema}`);
  await admin.end();
  const db = await openPostgres({ url, schema, max: options.poolMax ?? 25 });
  await migrate(db);
  return postgresTestDatabase(url, schema, db);
}
