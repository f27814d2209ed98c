import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import pg from 'pg';
import { inject } from 'vitest';
import type { Database } from '../../src/db/db.js';
import { migrate } from '../../src/db/migrate.js';
import { openPglite, type PgliteDatabase } from '../../src/db/pglite.js';
import { openPostgres, type PostgresOptions } from '../../src/db/postgres.js';

export type Backend = 'pglite' | 'postgres';

/**
 * Storage-touching tests run on PGlite always and on PostgreSQL when TEST_DATABASE_URL is set —
 * on PostgreSQL only when TEST_PGBOUNCER_URL is set too (the pass through pgbouncer is about
 * PostgreSQL; PGlite ran in the main pass).
 */
export const BACKENDS: Backend[] = process.env.TEST_DATABASE_URL ? (process.env.TEST_PGBOUNCER_URL ? ['postgres'] : ['pglite', 'postgres']) : ['pglite'];

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

/**
 * TEST_PGBOUNCER_URL: the same PostgreSQL as TEST_DATABASE_URL through pgbouncer in transaction
 * mode (.ci/run starts one). When set, every pixgate under test (in-process and spawned) reaches
 * its schema through it (DATABASE_POOLER=transaction) and LISTENs straight to PostgreSQL
 * (DATABASE_LISTEN_URL = TEST_DATABASE_URL). pgbouncer passes no `options`, so each test schema has
 * a login role of the same name whose own setting is `search_path` (pgbouncer keeps one pool per
 * database and user); tests' own inspection clients stay on TEST_DATABASE_URL.
 */
export const PGBOUNCER_URL = process.env.TEST_PGBOUNCER_URL || undefined;

function withUser(url: string, user: string): string {
  const u = new URL(url);
  u.username = user;
  u.password = '';
  return u.toString();
}

function adminUrl(): string {
  const url = process.env.TEST_DATABASE_URL;
  if (!url) throw new Error('TEST_DATABASE_URL is not set');
  return url;
}

/** How a test reaches the PostgreSQL schema `schema` (made by `createTestSchema` or `openTestDatabase`). */
export function schemaAccess(schema: string) {
  const direct = adminUrl();
  const viaPooler = PGBOUNCER_URL !== undefined;
  const optionsUrl = `${direct}${direct.includes('?') ? '&' : '?'}options=${encodeURIComponent(`-c search_path=${schema}`)}`;
  return {
    schema,
    /** pixgate's environment for this schema (DATABASE_URL and, through pgbouncer, the rest). */
    env: (): Record<string, string> =>
      viaPooler
        ? { DATABASE_URL: withUser(PGBOUNCER_URL!, schema), DATABASE_POOLER: 'transaction', DATABASE_LISTEN_URL: withUser(direct, schema) }
        : { DATABASE_URL: optionsUrl },
    /** A Database handle on the schema, the way pixgate would open it. */
    open: (options: Omit<PostgresOptions, 'url' | 'schema' | 'pooler' | 'listenUrl'> = {}): Promise<Database> =>
      viaPooler
        ? openPostgres({ ...options, url: withUser(PGBOUNCER_URL!, schema), pooler: 'transaction', listenUrl: withUser(direct, schema) })
        : openPostgres({ ...options, url: direct, schema }),
    /** A plain client straight to PostgreSQL with the schema as search_path (tests' own inspection). */
    client: (): pg.Client => new pg.Client({ connectionString: direct, options: `-c search_path=${schema}` }),
  };
}

/**
 * Creates schema `schema` (through pgbouncer: also its login role, see PGBOUNCER_URL); `drop`
 * removes both.
 */
export async function createTestSchema(schema: string): Promise<ReturnType<typeof schemaAccess> & { drop(): Promise<void> }> {
  const admin = new pg.Client({ connectionString: adminUrl() });
  await admin.connect();
  try {
    if (PGBOUNCER_URL !== undefined) {
      await admin.query(`CREATE ROLE ${schema} LOGIN SUPERUSER`);
      await admin.query(`ALTER ROLE ${schema} SET search_path = ${schema}`);
    }
    await admin.query(`CREATE SCHEMA ${schema}`);
  } finally {
    await admin.end();
  }
  return { ...schemaAccess(schema), drop: () => dropTestSchema(schema) };
}

/**
 * An empty database with no migration applied (migration tests apply some, write old-style rows,
 * then apply the rest): in-memory PGlite, or a fresh PostgreSQL schema that `close` drops.
 */
export async function openEmptyDatabase(backend: Backend, options: { max?: number } = {}): Promise<{ db: Database; close: () => Promise<void> }> {
  if (backend === 'pglite') {
    const db = await openPglite({ dataDir: 'memory://' });
    return { db, close: () => db.close() };
  }
  const access = await createTestSchema(`t_${randomBytes(6).toString('hex')}`);
  const db = await access.open({ max: options.max ?? 2 });
  return {
    db,
    close: async () => {
      await db.close();
      await access.drop();
    },
  };
}

export async function dropTestSchema(schema: string): Promise<void> {
  const c = new pg.Client({ connectionString: adminUrl() });
  await c.connect();
  try {
    await c.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
    if (PGBOUNCER_URL !== undefined) await c.query(`DROP ROLE IF EXISTS ${schema}`).catch(() => {}); // pgbouncer may still hold its connections
  } finally {
    await c.end();
  }
}

function postgresTestDatabase(schema: string, db: Database, max: number): TestDatabase {
  return {
    db,
    backend: 'postgres',
    async close() {
      await db.close();
      await dropTestSchema(schema);
    },
    async reopen() {
      await db.close();
      return postgresTestDatabase(schema, await schemaAccess(schema).open({ max }), max);
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
  const access = await createTestSchema(`t_${randomBytes(6).toString('hex')}`);
  const max = options.poolMax ?? 25;
  const db = await access.open({ max });
  await migrate(db);
  return postgresTestDatabase(access.schema, db, max);
}

/**
 * A second process's view of `shared`: on PostgreSQL a pool of its own on the same schema (what
 * another pixgate process would open, so NOTIFY, locks and snapshots cross between them); on PGlite,
 * which one process owns, the same handle. Closing it leaves `shared` open.
 */
export async function secondHandle(shared: TestDatabase, options: { max?: number; applicationName?: string } = {}): Promise<TestDatabase> {
  if (shared.backend !== 'postgres') return shared;
  const [{ s: schema }] = (await shared.db.query<{ s: string }>('SELECT current_schema() AS s')) as [{ s: string }];
  const db = await schemaAccess(schema).open({ max: options.max ?? 5, applicationName: options.applicationName ?? 'pixgate-b' });
  return { db, backend: 'postgres', close: () => db.close(), reopen: () => Promise.reject(new Error('a second handle is not reopened')) };
}
