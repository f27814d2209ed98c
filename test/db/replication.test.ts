import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePort, PostgresCluster, postgresBin, sleep } from '../../bench/chaos/infra.js';
import { parseConfig } from '../../src/config.js';
import type { Database } from '../../src/db/db.js';
import { migrate } from '../../src/db/migrate.js';
import { openPostgres } from '../../src/db/postgres.js';
import { openReadReplica, type ReadReplica } from '../../src/db/replica.js';
import { merchantWithKey } from '../helpers/client.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

const canRun = postgresBin() !== undefined && (process.getuid?.() !== 0 || spawnSync('id', ['postgres']).status === 0);

/** A hot standby of `primary` streaming from it (pg_basebackup -R), on a port of its own. */
async function startStandby(primary: PostgresCluster): Promise<PostgresCluster> {
  const standby = new PostgresCluster();
  standby.port = await freePort();
  const bin = join(postgresBin()!, 'pg_basebackup');
  const args = ['-D', standby.data, '-R', '-X', 'stream', '-h', '127.0.0.1', '-p', String(primary.port), '-U', 'postgres'];
  const r = process.getuid?.() === 0 ? spawnSync('runuser', ['-u', 'postgres', '--', bin, ...args], { encoding: 'utf8' }) : spawnSync(bin, args, { encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`pg_basebackup failed: ${r.stderr}`);
  (standby as unknown as { options: string }).options = `-c port=${standby.port} -c listen_addresses=127.0.0.1 -c unix_socket_directories=${standby.dir} -c max_connections=200 -c shared_buffers=32MB -c hot_standby=on`;
  await standby.start();
  return standby;
}

const at = (c: PostgresCluster) => `127.0.0.1:${c.port}`;

/**
 * Issue 25, item 3: libpq-style host lists with target_session_attrs, and DATABASE_READ_URL for
 * reads that tolerate a bounded staleness — on a primary and a streaming hot standby of the test's
 * own.
 */
describe.runIf(canRun)('replication-aware configuration (own primary and streaming standby)', () => {
  let primary: PostgresCluster;
  let standby: PostgresCluster;
  let db: Database;
  let standbyAdmin: pg.Client;

  beforeAll(async () => {
    primary = new PostgresCluster('-c wal_level=replica -c max_wal_senders=5');
    await primary.init();
    db = await openPostgres({ url: primary.url, max: 10 });
    await migrate(db);
    await db.exec('CREATE TABLE lag_probe (id int PRIMARY KEY, at timestamptz NOT NULL DEFAULT clock_timestamp())');
    standby = await startStandby(primary);
    standbyAdmin = new pg.Client({ connectionString: standby.url });
    await standbyAdmin.connect();
  }, 120_000);
  afterAll(async () => {
    await standbyAdmin?.end().catch(() => {});
    await db?.close();
    await standby?.destroy();
    await primary?.destroy();
  });

  it('DATABASE_URL with several hosts: target_session_attrs=read-write skips a dead host and the standby and writes on the primary', async () => {
    const dead = await freePort();
    const url = `postgres://postgres@127.0.0.1:${dead},${at(standby)},${at(primary)}/postgres?target_session_attrs=read-write`;
    expect(parseConfig({ DATABASE_URL: url }).databaseUrl).toBe(url);
    const multi = await openPostgres({ url, max: 3 });
    try {
      const rows = await multi.transaction((tx) => tx.query<{ rec: boolean; port: number }>('SELECT pg_is_in_recovery() AS rec, inet_server_port() AS port'));
      expect(rows).toEqual([{ rec: false, port: primary.port }]);
      // LISTEN goes to the same kind of server.
      await multi.listen('hosts_probe', () => {});
    } finally {
      await multi.close();
    }
    // Any server: the first that answers (the standby); standby: only a standby.
    const any = await openPostgres({ url: `postgres://postgres@127.0.0.1:${dead},${at(standby)},${at(primary)}/postgres`, max: 1 });
    const standbyOnly = await openPostgres({ url: `postgres://postgres@${at(primary)},${at(standby)}/postgres?target_session_attrs=standby`, max: 1 });
    try {
      expect(await any.query('SELECT inet_server_port() AS port')).toEqual([{ port: standby.port }]);
      expect(await standbyOnly.query('SELECT inet_server_port() AS port')).toEqual([{ port: standby.port }]);
    } finally {
      await any.close();
      await standbyOnly.close();
    }
    expect(() => parseConfig({ DATABASE_URL: `postgres://postgres@${at(primary)},/postgres` })).toThrow('DATABASE_URL: the database URL names an empty or malformed host: ""');
    expect(() => parseConfig({ DATABASE_URL: `postgres://postgres@${at(primary)}/postgres?target_session_attrs=writable` })).toThrow(/target_session_attrs must be one of/);
  }, 60_000);

  it('DATABASE_READ_URL: reads go to the replica while its lag is within DATABASE_READ_MAX_LAG_MS, to the primary past it; the lag is measured', async () => {
    const read: ReadReplica = await openReadReplica(db, { url: standby.url, max: 3, maxLagMs: 400, checkEveryMs: 50 });
    try {
      // Measured staleness: how long a commit on the primary takes to be visible on the replica.
      const delays: number[] = [];
      for (let i = 1; i <= 40; i++) {
        await db.query('INSERT INTO lag_probe (id) VALUES ($1)', [i]);
        const t0 = performance.now();
        while ((await standbyAdmin.query('SELECT 1 FROM lag_probe WHERE id = $1', [i])).rows.length === 0) await sleep(1);
        delays.push(performance.now() - t0);
      }
      delays.sort((x, y) => x - y);
      console.log(`replica visibility after commit: p50 ${delays[20]!.toFixed(1)} ms, max ${delays[39]!.toFixed(1)} ms (40 commits)`);
      await sleep(120); // a check after the last commit
      expect(read.usingReplica()).toBe(true);
      expect(await read.query('SELECT pg_is_in_recovery() AS rec')).toEqual([{ rec: true }]);

      // Replay paused: the replica falls behind; past 400 ms of lag the reads go to the primary.
      await standbyAdmin.query('SELECT pg_wal_replay_pause()');
      await db.query('INSERT INTO lag_probe (id) VALUES (1000)');
      const until = Date.now() + 10_000;
      while (read.usingReplica() && Date.now() < until) await sleep(20);
      expect(read.lagMs() ?? Infinity).toBeGreaterThan(400);
      expect(await read.query('SELECT pg_is_in_recovery() AS rec')).toEqual([{ rec: false }]);
      expect(await read.query('SELECT id FROM lag_probe WHERE id = 1000')).toEqual([{ id: 1000 }]);

      // Replay resumed and a fresh commit: back on the replica.
      await standbyAdmin.query('SELECT pg_wal_replay_resume()');
      await db.query('INSERT INTO lag_probe (id) VALUES (1001)');
      const back = Date.now() + 10_000;
      while (!read.usingReplica() && Date.now() < back) await sleep(20);
      expect(await read.query('SELECT pg_is_in_recovery() AS rec')).toEqual([{ rec: true }]);
    } finally {
      await standbyAdmin.query('SELECT pg_wal_replay_resume()').catch(() => {});
      await read.close();
    }
  }, 60_000);

  it('the statement is read from the replica (a stale one within the bound), the balance from the primary', async () => {
    let s: TestServer | undefined;
    try {
      s = await startTestServer({
        database: { db, backend: 'postgres', close: async () => {}, reopen: () => Promise.reject(new Error('not here')) },
        env: { DATABASE_URL: primary.url, DATABASE_READ_URL: standby.url, DATABASE_READ_MAX_LAG_MS: '60000' },
        workers: false,
      });
      const m = await merchantWithKey(s, { depositCents: 10_000 });
      const credits = async () => (await m.client.get('/statement')).body.data.length as number;
      const until = Date.now() + 10_000;
      while ((await credits()) === 0 && Date.now() < until) await sleep(20);
      const seen = await credits();
      expect(seen).toBeGreaterThan(0);
      // Replay paused (lag within the 60 s bound): a new deposit is in the balance at once, and in
      // the statement only once the replica has it.
      await standbyAdmin.query('SELECT pg_wal_replay_pause()');
      await s.admin('POST', `/accounts/${m.accountId}/deposits`, { amount: 500 });
      expect((await m.client.get('/balance')).status).toBe(200);
      expect(await credits()).toBe(seen);
      await standbyAdmin.query('SELECT pg_wal_replay_resume()');
      const back = Date.now() + 10_000;
      while ((await credits()) === seen && Date.now() < back) await sleep(20);
      expect(await credits()).toBe(seen + 1);
    } finally {
      await standbyAdmin.query('SELECT pg_wal_replay_resume()').catch(() => {});
      await s?.close();
    }
  }, 60_000);
});
