/**
 * npm run bench:idle — what an idle server costs the database: starts the built server
 * (dist/src/main.js) on a fresh PostgreSQL database of its own, lets start-up settle, then counts
 * the statements it sends over IDLE_SECONDS, read from `pixgate_db_statements_total` on
 * METRICS_PORT (by source: request, background, rail = the simulated rail, listen), next to the
 * transactions PostgreSQL itself counted for that database (pg_stat_database.xact_commit; every
 * autocommit statement is one transaction there, an explicit transaction one in all). Figures only.
 *
 *   BENCH_DATABASE_URL  postgres://postgres@127.0.0.1:5432/postgres (a database is created next to it)
 *   WEB_CONCURRENCY     1 (above 1 needs REDIS_URL, passed on)
 *   IDLE_SECONDS        10
 *   SETTLE_SECONDS      5
 */
import { createServer } from 'node:net';
import pg from 'pg';
import { startPixgate } from '../test/helpers/process.js';

const base = process.env.BENCH_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
const seconds = Number(process.env.IDLE_SECONDS ?? 10);
const settle = Number(process.env.SETTLE_SECONDS ?? 5);
const concurrency = process.env.WEB_CONCURRENCY ?? '1';
const dbName = `pixgate_idle_${Date.now().toString(36)}`;

const freePort = () =>
  new Promise<number>((resolve, reject) => {
    const s = createServer();
    s.listen(0, '127.0.0.1', () => {
      const port = (s.address() as { port: number }).port;
      s.close(() => resolve(port));
    });
    s.on('error', reject);
  });

async function statements(metricsPort: number): Promise<Record<string, number>> {
  const text = await (await fetch(`http://127.0.0.1:${metricsPort}/metrics`)).text();
  const out: Record<string, number> = {};
  for (const m of text.matchAll(/^pixgate_db_statements_total\{pool="([a-z_]+)"\} (\d+)/gm)) out[m[1]!] = Number(m[2]);
  return out;
}

async function main() {
  const admin = new pg.Client({ connectionString: base });
  await admin.connect();
  await admin.query(`CREATE DATABASE ${dbName}`);
  const url = new URL(base);
  url.pathname = `/${dbName}`;
  const metricsPort = await freePort();
  const server = await startPixgate({
    DATABASE_URL: url.toString(),
    WEB_CONCURRENCY: concurrency,
    METRICS_PORT: String(metricsPort),
    ADMIN_TOKEN: 'bench-idle-admin-token-0123456789',
    LOG_LEVEL: 'info',
    APP_ENV: 'local',
    ...(process.env.REDIS_URL ? { REDIS_URL: process.env.REDIS_URL } : {}),
  });
  const xacts = async () => {
    const [row] = (await admin.query<{ n: string }>(`SELECT pg_stat_clear_snapshot(), xact_commit + xact_rollback AS n FROM pg_stat_database WHERE datname = $1`, [dbName])).rows;
    return Number(row!.n);
  };
  try {
    await new Promise((r) => setTimeout(r, settle * 1000));
    const before = await statements(metricsPort);
    const x0 = await xacts();
    await new Promise((r) => setTimeout(r, seconds * 1000));
    const after = await statements(metricsPort);
    await new Promise((r) => setTimeout(r, 1000)); // PostgreSQL flushes its counters about every second
    const x1 = await xacts();
    const rate = (n: number) => (n / seconds).toFixed(2);
    console.log(`idle over ${seconds} s, WEB_CONCURRENCY=${concurrency}, PostgreSQL (${dbName}):`);
    let total = 0;
    for (const source of Object.keys(after).sort()) {
      const n = after[source]! - (before[source] ?? 0);
      if (source !== 'rail') total += n;
      console.log(`  statements/s ${source.padEnd(10)} ${rate(n)}`);
    }
    console.log(`  statements/s pixgate (all but rail) ${rate(total)}`);
    console.log(`  transactions/s seen by PostgreSQL (pg_stat_database, rail included) ${rate(x1 - x0)}`);
  } finally {
    server.proc.kill('SIGTERM');
    await server.exited;
    await admin.query(`DROP DATABASE ${dbName} WITH (FORCE)`);
    await admin.end();
  }
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
