/** pgbench: what the same PostgreSQL does on its own (TPC-B and select-only on a throwaway database). */
import { execFileSync } from 'node:child_process';
import pg from 'pg';
import { CONCURRENCY, DB_URL, env, PGBENCH_SCALE, SECONDS } from './config.js';

export interface PgbenchFigures {
  tpcb: number;
  selectOnly: number;
}

function pgbenchArgs(): { args: string[]; env: NodeJS.ProcessEnv } {
  const u = new URL(DB_URL);
  return {
    args: ['-h', u.hostname, '-p', u.port || '5432', '-U', decodeURIComponent(u.username || 'postgres')],
    env: { ...env, ...(u.password ? { PGPASSWORD: decodeURIComponent(u.password) } : {}) },
  };
}

const PGBENCH_DB = 'pixgate_bench_pgbench';

export async function pgbenchInit(): Promise<void> {
  const admin = new pg.Client({ connectionString: DB_URL });
  await admin.connect();
  await admin.query(`DROP DATABASE IF EXISTS ${PGBENCH_DB}`);
  await admin.query(`CREATE DATABASE ${PGBENCH_DB}`);
  await admin.end();
  const { args, env: e } = pgbenchArgs();
  execFileSync('pgbench', [...args, '-i', '-q', '-s', String(PGBENCH_SCALE), PGBENCH_DB], { env: e, stdio: 'ignore' });
}

export async function pgbenchDrop(): Promise<void> {
  const admin = new pg.Client({ connectionString: DB_URL });
  await admin.connect();
  await admin.query(`DROP DATABASE IF EXISTS ${PGBENCH_DB}`);
  await admin.end();
}

function pgbenchRun(selectOnly: boolean): number {
  const { args, env: e } = pgbenchArgs();
  const out = execFileSync(
    'pgbench',
    [...args, '-c', String(CONCURRENCY), '-j', '2', '-T', String(SECONDS), ...(selectOnly ? ['-S'] : []), PGBENCH_DB],
    { env: e, encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] },
  );
  const m = /tps = ([\d.]+)/.exec(out);
  if (!m) throw new Error(`pgbench printed no tps:\n${out}`);
  return Number(m[1]);
}

export function pgbench(label: string): PgbenchFigures {
  const f = { tpcb: pgbenchRun(false), selectOnly: pgbenchRun(true) };
  console.log(`pgbench ${label}: TPC-B ${f.tpcb.toFixed(0)} tps, select-only ${f.selectOnly.toFixed(0)} tps (scale ${PGBENCH_SCALE}, ${CONCURRENCY} clients, 2 threads, ${SECONDS} s)`);
  return f;
}
