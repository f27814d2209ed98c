/**
 * npm run bench:profile — where a cash-out's time goes, counted rather than timed:
 *
 *   - a throwaway PostgreSQL cluster with pg_stat_statements and its own redis-server (nothing
 *     touches the machine's PostgreSQL or Redis), pixgate (dist/) on them under `node --cpu-prof`;
 *   - idle: statements per second with no request;
 *   - N/10 signed cash-outs as a warm-up, ANALYZE, then N more (PROFILE_ACCOUNTS accounts,
 *     concurrency 32) and their settlement: statements per cash-out end to end (request, rail
 *     simulator, settlement, outbox, webhooks) and the top statements by calls and by total time;
 *   - N GET /balance: statements per request;
 *   - the server's CPU profile: the functions with the most self time, by package.
 *
 *   PROFILE_REQUESTS   2000   cash-outs and balance reads
 *   PROFILE_TOP        12     rows of each top list
 *   PROFILE_WORKERS    1      WEB_CONCURRENCY of the server (the CPU profile is the primary's: use 1)
 *   PROFILE_ACCOUNTS   10     accounts the cash-outs go round
 *   PROFILE_PG_OPTIONS (none)  more settings of the throwaway cluster, e.g. auto_explain:
 *                              '-c shared_preload_libraries=pg_stat_statements,auto_explain
 *                               -c auto_explain.log_min_duration=0 -c auto_explain.sample_rate=0.01
 *                               -c auto_explain.log_analyze=on'
 *   PROFILE_PG_LOG     (none)  a file the cluster's server log is copied to before it is removed
 */
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { copyFileSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { Pool } from 'undici';
import { freePort, MAIN, missingPrerequisite, PostgresCluster, RedisServer, sleep } from './chaos/infra.js';
import { auth, call, cashOuts, merchant, printCpuProfile, type BenchRequest } from './lib.js';

const N = Number(process.env.PROFILE_REQUESTS ?? 2000);
const TOP = Number(process.env.PROFILE_TOP ?? 12);
const WORKERS = Number(process.env.PROFILE_WORKERS ?? 1);
const ACCOUNTS = Number(process.env.PROFILE_ACCOUNTS ?? 10);
const CONCURRENCY = 32;

async function drive(url: string, count: number, next: () => BenchRequest): Promise<{ seconds: number; statuses: Record<number, number> }> {
  const pool = new Pool(url, { connections: CONCURRENCY });
  const statuses: Record<number, number> = {};
  let sent = 0;
  const t0 = Date.now();
  await Promise.all(
    Array.from({ length: CONCURRENCY }, async () => {
      while (sent < count) {
        sent++;
        const res = await pool.request(next());
        await res.body.dump();
        statuses[res.statusCode] = (statuses[res.statusCode] ?? 0) + 1;
      }
    }),
  );
  await pool.close();
  return { seconds: (Date.now() - t0) / 1000, statuses };
}

interface StatementRow {
  query: string;
  calls: number;
  total_ms: number;
  plan_ms: number;
}

async function statements(db: pg.Client): Promise<StatementRow[]> {
  const { rows } = await db.query<StatementRow>(
    `SELECT regexp_replace(query, '\\s+', ' ', 'g') AS query, calls::int AS calls, total_exec_time + total_plan_time AS total_ms, total_plan_time AS plan_ms
       FROM pg_stat_statements WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
        AND query NOT ILIKE '%pg_stat_statements%'`,
  );
  return rows;
}

function printTop(title: string, rows: StatementRow[], per: number) {
  const calls = rows.reduce((a, r) => a + r.calls, 0);
  const ms = rows.reduce((a, r) => a + r.total_ms, 0);
  const plan = rows.reduce((a, r) => a + r.plan_ms, 0);
  console.log(
    `${title}: ${calls} statements (${(calls / per).toFixed(1)} per operation), ${ms.toFixed(0)} ms inside PostgreSQL (${(ms / per).toFixed(2)} ms per operation, of which planning ${(plan / per).toFixed(2)} ms)`,
  );
  const show = (label: string, sorted: StatementRow[]) => {
    console.log(`  top by ${label}:`);
    for (const r of sorted.slice(0, TOP)) {
      console.log(
        `    ${String(r.calls).padStart(7)} calls ${(r.calls / per).toFixed(2).padStart(6)}/op ${r.total_ms.toFixed(0).padStart(7)} ms (plan ${r.plan_ms.toFixed(0).padStart(5)})  ${r.query.slice(0, 100)}`,
      );
    }
  };
  show('calls', [...rows].sort((a, b) => b.calls - a.calls));
  show('total time', [...rows].sort((a, b) => b.total_ms - a.total_ms));
}

async function main() {
  const missing = missingPrerequisite();
  if (missing) throw new Error(`bench:profile cannot run here: ${missing}`);
  const cluster = new PostgresCluster(
    `-c shared_preload_libraries=pg_stat_statements -c pg_stat_statements.track=top -c pg_stat_statements.track_planning=on ${process.env.PROFILE_PG_OPTIONS ?? ''}`.trim(),
  );
  const redis = new RedisServer();
  const profileDir = mkdtempSync(join(tmpdir(), 'pixgate-cpuprof-'));
  await cluster.init();
  await redis.start();
  const db = new pg.Client({ connectionString: cluster.url });
  await db.connect();
  await db.query('CREATE EXTENSION pg_stat_statements');
  const port = await freePort();
  const adminToken = `profile-${randomBytes(12).toString('hex')}`;
  const server = spawn(process.execPath, ['--cpu-prof', `--cpu-prof-dir=${profileDir}`, MAIN], {
    env: {
      PATH: process.env.PATH ?? '',
      PORT: String(port),
      DATABASE_URL: cluster.url,
      REDIS_URL: redis.url,
      ADMIN_TOKEN: adminToken,
      RATE_LIMIT_PER_MINUTE: '100000000',
      SIM_SETTLEMENT_MS: '300',
      WEB_CONCURRENCY: String(WORKERS),
      LOG_LEVEL: 'warn',
    },
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  const t = { url: `http://127.0.0.1:${port}`, adminToken };
  try {
    for (let i = 0; ; i++) {
      try {
        if ((await fetch(`${t.url}/readyz`)).status === 200) break;
      } catch {
        // starting
      }
      if (i > 300 || server.exitCode !== null) throw new Error('pixgate did not start');
      await sleep(200);
    }
    const pixKey = `profile-${randomBytes(4).toString('hex')}@example.com`;
    await call(t, 'sandbox', 'POST', '/dict/keys', { key: pixKey, type: 'email', name: 'Profile Receiver', document: '52998224725', ispb: '18236120' });
    const accounts = await Promise.all(Array.from({ length: ACCOUNTS }, () => merchant(t)));

    await sleep(3_000);
    await db.query('SELECT pg_stat_statements_reset()');
    await sleep(10_000);
    const idle = await statements(db);
    console.log(`idle: ${(idle.reduce((a, r) => a + r.calls, 0) / 10).toFixed(1)} statements/s over 10 s`);
    for (const r of idle.sort((a, b) => b.calls - a.calls).slice(0, 5)) console.log(`    ${String(r.calls).padStart(7)} calls  ${r.query.slice(0, 110)}`);

    // Warm-up, then ANALYZE as autovacuum would on a live database (and as pgbench -i does): the
    // plans measured are those of tables with statistics, not of tables born a second ago.
    const next = cashOuts(accounts, pixKey);
    await drive(t.url, Math.ceil(N / 10), next);
    await db.query('ANALYZE');
    await db.query('SELECT pg_stat_statements_reset()');
    const run = await drive(t.url, N, next);
    // Settlement, outbox and webhook work of those cash-outs: wait until none is left in flight.
    for (let i = 0; i < 100; i++) {
      const { rows } = await db.query<{ n: number }>(`SELECT count(*)::int AS n FROM transactions WHERE kind = 'cash_out' AND stage < 3`);
      if (rows[0]!.n === 0) break;
      await sleep(200);
    }
    await sleep(1_000);
    console.log(`\n${N} cash-outs in ${run.seconds.toFixed(1)} s (${(N / run.seconds).toFixed(0)}/s): ${JSON.stringify(run.statuses)}`);
    printTop('cash-out end to end (request + rail + settlement + background)', await statements(db), N);

    await db.query('SELECT pg_stat_statements_reset()');
    const m = accounts[0]!;
    const reads = await drive(t.url, N, () => ({ path: '/api/external/balance', method: 'GET', headers: { authorization: auth(m) } }));
    console.log(`\n${N} GET /balance in ${reads.seconds.toFixed(1)} s (${(N / reads.seconds).toFixed(0)}/s): ${JSON.stringify(reads.statuses)}`);
    printTop('GET /balance (including background work meanwhile)', await statements(db), N);
  } finally {
    server.kill('SIGTERM');
    await new Promise((r) => server.once('exit', r));
    await db.end();
    printCpuProfile(profileDir);
    rmSync(profileDir, { recursive: true, force: true });
    await redis.stop();
    if (process.env.PROFILE_PG_LOG) copyFileSync(join(cluster.dir, 'postgres.log'), process.env.PROFILE_PG_LOG);
    await cluster.destroy();
  }
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
