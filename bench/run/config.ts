/** The bench's settings, from the environment (documented at the top of bench/run.ts). */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { packageRoot } from '../../src/lib/paths.js';

export const env = process.env;
export const int = (name: string, fallback: number) => (env[name] ? Number(env[name]) : fallback);
export const ACCOUNTS = int('BENCH_ACCOUNTS', 50);
export const CONCURRENCY = int('BENCH_CONCURRENCY', 32);
export const SECONDS = int('BENCH_SECONDS', 10);
export const WARMUP_SECONDS = int('BENCH_WARMUP_SECONDS', 2);
export const PGBENCH_SCALE = int('BENCH_PGBENCH_SCALE', 32);
export const WORKER_COUNTS = (env.BENCH_WORKERS ?? '1,2').split(',').map(Number);
export const ONLY = env.BENCH_ONLY ? new Set(env.BENCH_ONLY.split(',')) : undefined;
export const GROUPS: Record<string, string> = { many: 'cash-out', hot: 'cash-out', balance: 'pipeline', v1: 'pipeline', v2: 'pipeline' };
export const wanted = (name: string) => ONLY === undefined || ONLY.has(name) || (GROUPS[name] !== undefined && ONLY.has(GROUPS[name]));
export const DB_URL = env.BENCH_DATABASE_URL ?? env.TEST_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
export const REDIS_URL = env.BENCH_REDIS_URL ?? env.TEST_REDIS_URL ?? 'redis://127.0.0.1:6379';
/** The Node flags of `npm start` (package.json), so the bench measures the process operators run. */
export const START_FLAGS = (env.BENCH_START_FLAGS ?? (JSON.parse(readFileSync(join(packageRoot, 'package.json'), 'utf8')) as { scripts: { start: string } }).scripts.start)
  .split(/\s+/)
  .filter((t) => t.startsWith('--'));
