/** What the bench measures: a pixgate it starts (the built dist/, as `npm start` runs it) on a fresh schema, or BENCH_URL. */
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { createServer, type AddressInfo } from 'node:net';
import { join } from 'node:path';
import pg from 'pg';
import { packageRoot } from '../../src/lib/paths.js';
import { DB_URL, env, int, REDIS_URL, START_FLAGS } from './config.js';
import { descendants } from './procfs.js';

export interface Target {
  url: string;
  adminToken: string;
  /** pids of the server's processes (primary and cluster workers); empty for BENCH_URL. */
  pids(): number[];
  /** The Prometheus text of METRICS_PORT (summed over workers), or undefined. */
  metrics(): Promise<string | undefined>;
  /** ANALYZE of the server's tables (a started server's schema only), as autovacuum would. */
  analyze(): Promise<void>;
  stop(): Promise<void>;
  describe: string;
}

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address() as AddressInfo;
      srv.close(() => resolve(port));
    });
    srv.on('error', reject);
  });
}

/** BENCH_URL: a running server (its sandbox on); nothing to start, sample or stop. */
function externalTarget(url: string): Target {
  if (!env.BENCH_ADMIN_TOKEN) throw new Error('BENCH_URL needs BENCH_ADMIN_TOKEN');
  return {
    url: url.replace(/\/$/, ''),
    adminToken: env.BENCH_ADMIN_TOKEN,
    pids: () => [],
    metrics: async () => undefined,
    analyze: async () => {},
    stop: async () => {},
    describe: `target ${url}`,
  };
}

/**
 * The started server's environment. Its schema is set through the startup parameter `options`
 * (search_path), which a pooler (pgbouncer) refuses or drops (issue 25, item 1): the bench talks
 * straight to PostgreSQL. Behind a pooler the schema would have to be a login role's own
 * search_path (as test/helpers/db.ts does with TEST_PGBOUNCER_URL); src/db offers nothing else.
 */
function serverEnv(schema: string, port: number, metricsPort: number, adminToken: string, workers: number, webhookPort: number): NodeJS.ProcessEnv {
  return {
    PATH: env.PATH ?? '',
    PORT: String(port),
    METRICS_PORT: String(metricsPort),
    DATABASE_URL: `${DB_URL}${DB_URL.includes('?') ? '&' : '?'}options=${encodeURIComponent(`-c search_path=${schema}`)}`,
    REDIS_URL,
    ADMIN_TOKEN: adminToken,
    WEB_CONCURRENCY: String(workers),
    RATE_LIMIT_PER_MINUTE: '100000000',
    SIM_SETTLEMENT_MS: String(int('BENCH_SETTLEMENT_MS', 1600)),
    WEBHOOK_ALLOWED_HOSTS: `127.0.0.1:${webhookPort}`,
    LOG_LEVEL: 'warn',
    // Pool sizes of the started server, when set for the bench.
    ...(env.DATABASE_POOL_MAX ? { DATABASE_POOL_MAX: env.DATABASE_POOL_MAX } : {}),
    ...(env.DATABASE_BACKGROUND_POOL_MAX ? { DATABASE_BACKGROUND_POOL_MAX: env.DATABASE_BACKGROUND_POOL_MAX } : {}),
    ...(env.BENCH_NODE_OPTIONS ? { NODE_OPTIONS: env.BENCH_NODE_OPTIONS } : {}),
    ...(env.MALLOC_ARENA_MAX ? { MALLOC_ARENA_MAX: env.MALLOC_ARENA_MAX } : {}),
  };
}

/** Waits until the server answers /readyz with 200 (60 s at most, or until it exits). */
async function waitReady(url: string, child: ChildProcess): Promise<void> {
  const deadline = Date.now() + 60_000;
  for (;;) {
    try {
      if ((await fetch(`${url}/readyz`)).status === 200) break;
    } catch {
      // not listening yet
    }
    if (child.exitCode !== null || Date.now() > deadline) throw new Error('the pixgate server did not start');
    await new Promise((r) => setTimeout(r, 200));
  }
}

export async function startTarget(workers: number, webhookPort: number): Promise<Target> {
  if (env.BENCH_URL) return externalTarget(env.BENCH_URL);
  const schema = `bench_${Date.now().toString(36)}`;
  const admin = new pg.Client({ connectionString: DB_URL });
  await admin.connect();
  await admin.query(`CREATE SCHEMA ${schema}`);
  await admin.end();
  const port = await freePort();
  const metricsPort = await freePort();
  const adminToken = `bench-${randomBytes(12).toString('hex')}`;
  const prof = env.BENCH_CPU_PROF ? ['--cpu-prof', `--cpu-prof-dir=${env.BENCH_CPU_PROF}`] : [];
  const child: ChildProcess = spawn(process.execPath, [...START_FLAGS, ...prof, join(packageRoot, 'dist', 'src', 'main.js')], {
    env: serverEnv(schema, port, metricsPort, adminToken, workers, webhookPort),
    stdio: ['ignore', env.BENCH_SERVER_STDOUT === '1' ? 'inherit' : 'ignore', 'inherit'],
  });
  const url = `http://127.0.0.1:${port}`;
  await waitReady(url, child);
  return {
    url,
    adminToken,
    pids: () => [child.pid!, ...descendants(child.pid!)],
    async metrics() {
      try {
        return await (await fetch(`http://127.0.0.1:${metricsPort}/metrics`)).text();
      } catch {
        return undefined;
      }
    },
    describe: `pixgate (node ${[...START_FLAGS, ...(env.BENCH_NODE_OPTIONS ? [env.BENCH_NODE_OPTIONS] : [])].join(' ')} dist/, WEB_CONCURRENCY=${workers}) on PostgreSQL schema ${schema} and Redis ${REDIS_URL}`,
    analyze: () => analyzeSchema(schema),
    async stop() {
      child.kill('SIGTERM');
      await new Promise((r) => child.once('exit', r));
      const c = new pg.Client({ connectionString: DB_URL });
      await c.connect();
      if (env.BENCH_KEEP_SCHEMA === '1') console.log(`kept schema ${schema} (BENCH_KEEP_SCHEMA=1): drop it with DROP SCHEMA ${schema} CASCADE`);
      else await c.query(`DROP SCHEMA ${schema} CASCADE`);
      await c.end();
    },
  };
}

/** ANALYZE of every table of the schema, as autovacuum would. */
async function analyzeSchema(schema: string): Promise<void> {
  const c = new pg.Client({ connectionString: DB_URL });
  await c.connect();
  try {
    const tables = await c.query<{ t: string }>(`SELECT format('%I.%I', schemaname, tablename) AS t FROM pg_tables WHERE schemaname = $1`, [schema]);
    await c.query(`ANALYZE ${tables.rows.map((r) => r.t).join(', ')}`);
  } finally {
    await c.end();
  }
}
