import { randomBytes } from 'node:crypto';
import pg from 'pg';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ConfigError, parseConfig } from '../../src/config.js';
import { notify, sqlState, type Database } from '../../src/db/db.js';
import { checkPooledSettings } from '../../src/db/open.js';
import { openPostgres, pooledSettingsMismatch } from '../../src/db/postgres.js';
import { pgbouncerBin, startPgbouncer, type Pgbouncer } from '../helpers/pgbouncer.js';

const direct = process.env.TEST_DATABASE_URL;
const waitFor = async (check: () => boolean, ms = 5_000) => {
  const until = Date.now() + ms;
  while (!check()) {
    if (Date.now() > until) throw new Error('timed out waiting');
    await new Promise((r) => setTimeout(r, 10));
  }
};

/**
 * Issue 25, item 1: pixgate through pgbouncer 1.18 in transaction mode — a pgbouncer of the test's
 * own in front of TEST_DATABASE_URL's PostgreSQL, and a login role whose settings carry the
 * search_path and the timeouts (`ALTER ROLE … SET`), as docs/deploy-database.md tells operators.
 */
describe.runIf(direct && pgbouncerBin())('through pgbouncer in transaction mode', () => {
  let bouncer: Pgbouncer;
  let admin: pg.Client;
  const role = `pool_${randomBytes(5).toString('hex')}`;
  const as = (url: string, user = role) => {
    const u = new URL(url);
    u.username = user;
    return u.toString();
  };
  const limits = { statementTimeoutMs: 1_500, lockTimeoutMs: 700, idleInTransactionTimeoutMs: 60_000 };
  const open = (extra: { listen?: boolean; max?: number } = {}) =>
    openPostgres({ url: as(bouncer.url), pooler: 'transaction', ...(extra.listen === false ? {} : { listenUrl: as(direct!) }), max: extra.max ?? 8, ...limits });

  beforeAll(async () => {
    bouncer = await startPgbouncer(direct!);
    admin = new pg.Client({ connectionString: direct });
    await admin.connect();
    await admin.query(`CREATE ROLE ${role} LOGIN SUPERUSER`);
    await admin.query(`CREATE SCHEMA ${role}`);
    await admin.query(`ALTER ROLE ${role} SET search_path = ${role}`);
    await admin.query(`ALTER ROLE ${role} SET statement_timeout = 1500`);
    await admin.query(`ALTER ROLE ${role} SET lock_timeout = 700`);
    await admin.query(`ALTER ROLE ${role} SET idle_in_transaction_session_timeout = 60000`);
    await admin.query(`CREATE TABLE ${role}.items (id int PRIMARY KEY, n int NOT NULL)`);
  });
  afterAll(async () => {
    await bouncer?.stop();
    await admin?.query(`DROP SCHEMA IF EXISTS ${role} CASCADE`);
    await admin?.query(`DROP ROLE IF EXISTS ${role}`).catch(() => {});
    await admin?.end();
  });

  it('connects with the timeouts configured (no startup parameters) and runs parameterized statements from many clients without named statements', async () => {
    const a = await open();
    const b = await open();
    try {
      // Two pools of one role share pgbouncer's server connections: a named statement prepared by
      // one on a server connection is unknown to, or already exists for, the next client there.
      await Promise.all(
        [a, b].flatMap((db, k) =>
          Array.from({ length: 40 }, (_, i) =>
            db.transaction(async (tx) => {
              await tx.query('INSERT INTO items (id, n) VALUES ($1, $2)', [k * 1000 + i, i]);
              return tx.query('SELECT n FROM items WHERE id = $1', [k * 1000 + i]);
            }),
          ),
        ),
      );
      const [row] = await a.query<{ n: number; schema: string }>('SELECT count(*)::int AS n, current_schema() AS schema FROM items WHERE n >= $1', [0]);
      expect(row).toEqual({ n: 80, schema: role });
    } finally {
      await a.close();
      await b.close();
    }
  });

  it("gets its timeouts from the role's settings through the pooler, and checks them at start", async () => {
    const db = await open();
    try {
      expect(await pooledSettingsMismatch(db, limits)).toEqual([]);
      // statement_timeout 1.5 s applies to a statement through the pooler.
      const err = await db.query('SELECT pg_sleep($1)', [3]).catch((e: unknown) => e);
      expect(sqlState(err)).toBe('57014');
      // A configuration that wants other values: a warning outside production, a refusal in it.
      const wanting = parseConfig({ DATABASE_URL: as(bouncer.url), DATABASE_POOLER: 'transaction', DATABASE_LISTEN_URL: as(direct!), DB_STATEMENT_TIMEOUT_MS: '30000', DB_LOCK_TIMEOUT_MS: '700' });
      expect(await pooledSettingsMismatch(db, wanting.db)).toEqual(['statement_timeout is 1500ms, the configuration wants 30000ms']);
      const warned: object[] = [];
      await checkPooledSettings(db, wanting, { warn: (obj) => warned.push(obj) });
      expect(warned).toHaveLength(1);
      const production = { ...wanting, appEnv: 'production' as const };
      await expect(checkPooledSettings(db, production, pino({ level: 'silent' }))).rejects.toThrow(ConfigError);
      await expect(checkPooledSettings(db, production, pino({ level: 'silent' }))).rejects.toThrow(/statement_timeout is 1500ms.*ALTER ROLE/);
    } finally {
      await db.close();
    }
  });

  it('keeps SET LOCAL inside its transaction: nothing leaks to the next client of the server connection', async () => {
    const db = await open({ max: 1 });
    try {
      await db.transaction(async (tx) => {
        await tx.query(`SELECT set_config('lock_timeout', '123ms', true)`);
        expect((await tx.query<{ t: string }>(`SELECT current_setting('lock_timeout') AS t`))[0]!.t).toBe('123ms');
      });
      expect((await db.query<{ t: string }>(`SELECT current_setting('lock_timeout') AS t`))[0]!.t).toBe('700ms');
    } finally {
      await db.close();
    }
  });

  it('LISTENs on DATABASE_LISTEN_URL straight to PostgreSQL; without it, listening refuses at once', async () => {
    const db = await open();
    const noListen = await open({ listen: false });
    try {
      const got: (string | null)[] = [];
      await db.listen('pooled_channel', (p) => got.push(p));
      await db.transaction((tx) => notify(tx, 'pooled_channel', 'one'));
      await waitFor(() => got.length === 1);
      expect(got).toEqual(['one']);
      expect(() => noListen.listen('pooled_channel', () => {})).toThrow(/DATABASE_LISTEN_URL/);
    } finally {
      await db.close();
      await noListen.close();
    }
  });

  it('the configuration: DATABASE_POOLER values, and transaction pooling requires DATABASE_LISTEN_URL', () => {
    expect(() => parseConfig({ DATABASE_URL: as(bouncer.url), DATABASE_POOLER: 'transaction' })).toThrow(/DATABASE_POOLER=transaction requires DATABASE_LISTEN_URL/);
    expect(() => parseConfig({ DATABASE_URL: as(bouncer.url), DATABASE_POOLER: 'statement' })).toThrow('DATABASE_POOLER must be one of none, session, transaction; got "statement"');
    expect(() => parseConfig({ DATABASE_LISTEN_URL: as(direct!) })).toThrow('DATABASE_LISTEN_URL requires DATABASE_URL');
    expect(parseConfig({ DATABASE_URL: as(bouncer.url) }).db.pooler).toBe('none');
    expect(parseConfig({ DATABASE_URL: as(bouncer.url), DATABASE_POOLER: 'session' }).db.pooler).toBe('session');
  });
});

/** Without a pooler, named prepared statements stay on (the hot path's speed): one per text. */
describe.runIf(direct)('without a pooler', () => {
  it('prepares parameterized statements by name', async () => {
    let db: Database | undefined;
    try {
      db = await openPostgres({ url: direct!, max: 1 });
      await db.query('SELECT $1::int AS one', [1]);
      const rows = await db.query<{ n: number }>(`SELECT count(*)::int AS n FROM pg_prepared_statements WHERE statement = $1`, ['SELECT $1::int AS one']);
      expect(rows[0]!.n).toBe(1);
    } finally {
      await db?.close();
    }
  });
});
