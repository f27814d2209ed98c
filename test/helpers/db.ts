import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import pg from 'pg';
import { inject } from 'vitest';
import type { Database } from '../../src/db/db.js';
import { migrate } from '../../src/db/migrate.js';
import { openPglite } from '../../src/db/pglite.js';
import { openPostgres } from '../../src/db/postgres.js';

export type Backend = 'pglite' | 'postgres';

/** Storage-touching tests run on PGlite always and on PostgreSQL when TEST_DATABASE_URL is set. */
export const BACKENDS: Backend[] = process.env.TEST_DATABASE_URL ? ['pglite', 'postgres'] : ['pglite'];

let template: Blob | undefined;

export interface TestDatabase {
  db: Database;
  backend: Backend;
  close(): Promise<void>;
}

/**
 * A fresh, migrated database of its own: an in-memory PGlite cloned from the run's template, or a
 * new schema on the PostgreSQL of TEST_DATABASE_URL (dropped on close).
 */
export async function openTestDatabase(backend: Backend): Promise<TestDatabase> {
  if (backend === 'pglite') {
    template ??= new Blob([readFileSync(inject('pgliteTemplate'))]);
    const db = await openPglite({ dataDir: 'memory://', loadDataDir: template });
    return { db, backend, close: () => db.close() };
  }
  const url = process.env.TEST_DATABASE_URL;
  if (!url) throw new Error('TEST_DATABASE_URL is not set');
  const schema = `t_${randomBytes(6).toString('hex')}`;
  const admin = new pg.Client({ connectionString: url });
  await admin.connect();
  await admin.query(`CREATE SCHEMA ${schema}`);
  await admin.end();
  const db = await openPostgres({ url, schema, max: 25 });
  await migrate(db);
  return {
    db,
    backend,
    async close() {
      await db.close();
      const c = new pg.Client({ connectionString: url });
      await c.connect();
      await c.query(`DROP SCHEMA ${schema} CASCADE`);
      await c.end();
    },
  };
}
