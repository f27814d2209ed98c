/**
 * npm run bench — pixgate measured side by side with what its PostgreSQL can do, in one run:
 *
 *   1. pgbench TPC-B (read-write) and select-only on a throwaway database of the same server;
 *   2. for each WEB_CONCURRENCY in BENCH_WORKERS (default "1,2"): a fresh pixgate (the built
 *      dist/, as `npm start` runs it) on a fresh schema, then
 *        - idle database statements per second (pixgate_db_statements_total from METRICS_PORT),
 *        - signed cash-outs over many accounts and on one hot account,
 *        - the request pipeline alone (GET /balance, signed POST /cpf/validate v1 and v2),
 *        - cash-outs with a webhook registered: deliveries/s and the delay from the state change
 *          (the cash-out's answer for pix.payout.processing; settled_at for pix.payout.confirmed)
 *          to receipt at a local receiver,
 *      with the largest RSS of each pixgate process sampled during the load, the CPU time per
 *      request of the server's processes, of PostgreSQL's and of this client (Linux /proc), and for each
 *      group-commit batcher (pixgate_batch_*) its batches, mean items, mean wait and mean run:
 *      where a cash-out's latency goes;
 *   3. pgbench again; each scenario is printed with its ratio to the mean of the two pgbench runs
 *      (TPC-B for money movements, select-only for reads). No pass/fail: figures only.
 *
 * To target a running server instead, set BENCH_URL and BENCH_ADMIN_TOKEN (its sandbox must be on;
 * idle, RSS and webhook figures are skipped).
 *
 *   BENCH_DATABASE_URL   postgres://postgres@127.0.0.1:5432/test  (or TEST_DATABASE_URL)
 *   BENCH_REDIS_URL      redis://127.0.0.1:6379                   (or TEST_REDIS_URL)
 *   BENCH_WORKERS        1,2   WEB_CONCURRENCY of each started server, one full run each
 *   BENCH_ACCOUNTS       50    accounts of the "many accounts" run
 *   BENCH_CONCURRENCY    32    requests in flight (and pgbench clients)
 *   BENCH_SECONDS        10    length of each run (after the warm-up) and of each pgbench run
 *   BENCH_WARMUP_SECONDS 2     warm-up of each scenario (JIT, pools, statistics) before it is measured
 *   BENCH_SETTLEMENT_MS  1600  SIM_SETTLEMENT_MS of the started server
 *   BENCH_PGBENCH_SCALE  32    pgbench scale factor (at least the number of clients, as pgbench advises)
 *   BENCH_PGBENCH        1     0 skips pgbench (ratios are then not printed)
 *   BENCH_CPU_PROF       (off) a folder: the started server runs under node --cpu-prof and its profile
 *                              (self time by package and function) is printed at the end
 *   BENCH_START_FLAGS    (those of `npm start`) Node flags of the started server, e.g. '' for V8's
 *                        defaults or '--max-old-space-size=512'
 *   BENCH_NODE_OPTIONS   (none) NODE_OPTIONS of the started server (e.g. --max-semi-space-size=8)
 *   MALLOC_ARENA_MAX     (none) passed to the started server when set (glibc arenas: RSS experiments)
 *   BENCH_TRACE          (off) a folder: each measured run writes <W>-<scenario>.txt there, one line
 *                              per request: its start (ms into the run) and its latency (ms) — to
 *                              tell a stall of every request at one moment from a spread-out tail
 *   BENCH_SERVER_STDOUT  (off) 1 passes the started server's stdout through (with
 *                              BENCH_START_FLAGS='--trace-gc', its GC pauses)
 *   BENCH_KEEP_SCHEMA    (off) 1 keeps each started server's schema after its runs (to EXPLAIN its
 *                        statements on the data a run left)
 *   BENCH_ONLY           (all) comma-separated scenarios to run: many,hot,balance,v1,v2,webhooks, or the
 *                              groups cash-out (many,hot) and pipeline (balance,v1,v2)
 */
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { createServer as createHttpServer } from 'node:http';
import { createServer, type AddressInfo } from 'node:net';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import pg from 'pg';
import { Pool } from 'undici';
import { signV1, signV2 } from '../src/auth/hmac.js';
import { canonicalize } from '../src/lib/canonicalJson.js';
import { packageRoot } from '../src/lib/paths.js';
import { auth, call, cashOuts, merchant, printCpuProfile, type BenchRequest, type Merchant } from './lib.js';

const env = process.env;
const int = (name: string, fallback: number) => (env[name] ? Number(env[name]) : fallback);
const ACCOUNTS = int('BENCH_ACCOUNTS', 50);
const CONCURRENCY = int('BENCH_CONCURRENCY', 32);
const SECONDS = int('BENCH_SECONDS', 10);
const WARMUP_SECONDS = int('BENCH_WARMUP_SECONDS', 2);
const PGBENCH_SCALE = int('BENCH_PGBENCH_SCALE', 32);
const WORKER_COUNTS = (env.BENCH_WORKERS ?? '1,2').split(',').map(Number);
const ONLY = env.BENCH_ONLY ? new Set(env.BENCH_ONLY.split(',')) : undefined;
const GROUPS: Record<string, string> = { many: 'cash-out', hot: 'cash-out', balance: 'pipeline', v1: 'pipeline', v2: 'pipeline' };
const wanted = (name: string) => ONLY === undefined || ONLY.has(name) || (GROUPS[name] !== undefined && ONLY.has(GROUPS[name]));
const DB_URL = env.BENCH_DATABASE_URL ?? env.TEST_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
const REDIS_URL = env.BENCH_REDIS_URL ?? env.TEST_REDIS_URL ?? 'redis://127.0.0.1:6379';
/** The Node flags of `npm start` (package.json), so the bench measures the process operators run. */
const START_FLAGS = (env.BENCH_START_FLAGS ?? (JSON.parse(readFileSync(join(packageRoot, 'package.json'), 'utf8')) as { scripts: { start: string } }).scripts.start)
  .split(/\s+/)
  .filter((t) => t.startsWith('--'));

interface Target {
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

/** Every process id of the machine (Linux /proc). */
function allPids(): number[] {
  return readdirSync('/proc').filter((name) => /^\d+$/.test(name)).map(Number);
}

/** The fields of /proc/<pid>/stat after the command name (field 3, the state, first), or undefined if it is gone. */
function procStat(pid: number): string[] | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  } catch {
    return undefined;
  }
}

/** Children of `pid`, recursively (Linux /proc). */
function descendants(pid: number): number[] {
  const byParent = new Map<number, number[]>();
  for (const child of allPids()) {
    const fields = procStat(child);
    if (!fields) continue; // gone meanwhile
    const ppid = Number(fields[1]);
    byParent.set(ppid, [...(byParent.get(ppid) ?? []), child]);
  }
  const out: number[] = [];
  const walk = (p: number) => {
    for (const c of byParent.get(p) ?? []) {
      out.push(c);
      walk(c);
    }
  };
  walk(pid);
  return out;
}

function rssMb(pid: number): number | undefined {
  try {
    const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
    return m ? Number(m[1]) / 1024 : undefined;
  } catch {
    return undefined;
  }
}

const CLOCK_TICKS_PER_SECOND = 100; // USER_HZ of /proc/<pid>/stat on Linux

/** CPU seconds (user + system) a process has used so far (Linux /proc), or 0 if it is gone. */
function cpuSeconds(pid: number): number {
  const fields = procStat(pid);
  return fields ? (Number(fields[11]) + Number(fields[12])) / CLOCK_TICKS_PER_SECOND : 0; // utime, stime
}

/** The PostgreSQL server's processes on this machine (postmaster, backends, helpers), by name. */
function postgresPids(): number[] {
  return allPids().filter((pid) => {
    try {
      return readFileSync(`/proc/${pid}/comm`, 'utf8').startsWith('postgres');
    } catch {
      return false; // gone meanwhile
    }
  });
}

/** CPU seconds used during a run, by side: the server's processes, PostgreSQL's and this client. */
interface CpuFigures {
  server: number;
  postgres: number;
  client: number;
}

function cpuSnapshot(serverPids: number[]): { server: Map<number, number>; postgres: Map<number, number>; client: number } {
  const snap = (pids: number[]) => new Map(pids.map((pid) => [pid, cpuSeconds(pid)]));
  const own = process.cpuUsage();
  return { server: snap(serverPids), postgres: snap(postgresPids()), client: (own.user + own.system) / 1e6 };
}

/**
 * CPU used between two snapshots: PostgreSQL's is every process of the local server (the bench's
 * own database is the only busy one). Linux only; a process that started during the run (a new
 * backend, an autovacuum worker) counts whole, one that ended during it is not counted.
 */
function cpuBetween(before: ReturnType<typeof cpuSnapshot>, after: ReturnType<typeof cpuSnapshot>): CpuFigures {
  const used = (a: Map<number, number>, b: Map<number, number>) => [...b].reduce((sum, [pid, s]) => sum + Math.max(0, s - (a.get(pid) ?? 0)), 0);
  return { server: used(before.server, after.server), postgres: used(before.postgres, after.postgres), client: after.client - before.client };
}

async function startTarget(workers: number, webhookPort: number): Promise<Target> {
  if (env.BENCH_URL) {
    if (!env.BENCH_ADMIN_TOKEN) throw new Error('BENCH_URL needs BENCH_ADMIN_TOKEN');
    return {
      url: env.BENCH_URL.replace(/\/$/, ''),
      adminToken: env.BENCH_ADMIN_TOKEN,
      pids: () => [],
      metrics: async () => undefined,
      analyze: async () => {},
      stop: async () => {},
      describe: `target ${env.BENCH_URL}`,
    };
  }
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
    env: {
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
    },
    stdio: ['ignore', env.BENCH_SERVER_STDOUT === '1' ? 'inherit' : 'ignore', 'inherit'],
  });
  const url = `http://127.0.0.1:${port}`;
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
    async analyze() {
      const c = new pg.Client({ connectionString: DB_URL });
      await c.connect();
      try {
        const tables = await c.query<{ t: string }>(`SELECT format('%I.%I', schemaname, tablename) AS t FROM pg_tables WHERE schemaname = $1`, [schema]);
        await c.query(`ANALYZE ${tables.rows.map((r) => r.t).join(', ')}`);
      } finally {
        await c.end();
      }
    },
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

// ---------------------------------------------------------------------------------------------
// pgbench: what the same PostgreSQL does on its own

interface PgbenchFigures {
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

async function pgbenchInit(): Promise<void> {
  const admin = new pg.Client({ connectionString: DB_URL });
  await admin.connect();
  await admin.query(`DROP DATABASE IF EXISTS ${PGBENCH_DB}`);
  await admin.query(`CREATE DATABASE ${PGBENCH_DB}`);
  await admin.end();
  const { args, env: e } = pgbenchArgs();
  execFileSync('pgbench', [...args, '-i', '-q', '-s', String(PGBENCH_SCALE), PGBENCH_DB], { env: e, stdio: 'ignore' });
}

async function pgbenchDrop(): Promise<void> {
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

function pgbench(label: string): PgbenchFigures {
  const f = { tpcb: pgbenchRun(false), selectOnly: pgbenchRun(true) };
  console.log(`pgbench ${label}: TPC-B ${f.tpcb.toFixed(0)} tps, select-only ${f.selectOnly.toFixed(0)} tps (scale ${PGBENCH_SCALE}, ${CONCURRENCY} clients, 2 threads, ${SECONDS} s)`);
  return f;
}

// ---------------------------------------------------------------------------------------------
// pixgate

interface RunResult {
  requests: number;
  seconds: number;
  statuses: Record<string, number>;
  latenciesMs: number[];
  maxRssMb: number[];
  /** CPU seconds used during the run by the server, PostgreSQL and the client (Linux only). */
  cpu: CpuFigures | undefined;
  /** Per group-commit batcher during the run (pixgate_batch_* metrics): batches, items, wait, run. */
  batches: Map<string, BatchFigures>;
  /** Database statements of all the server's processes during the run, by source (pixgate_db_statements_total). */
  statements: Map<string, number> | undefined;
}

interface BatchFigures {
  batches: number;
  items: number;
  waitSeconds: number;
  runSeconds: number;
}

/** The pixgate_batch_* counters of a scrape, by batcher. */
/**
 * Database statements so far by source (request, background, rail, listen; summed over workers)
 * from the Prometheus text of pixgate_db_statements_total, or undefined if it has none.
 */
function statementCounts(text: string | undefined): Map<string, number> | undefined {
  const lines = (text ?? '').split('\n').filter((l) => l.startsWith('pixgate_db_statements_total'));
  if (lines.length === 0) return undefined;
  const bySource = new Map<string, number>();
  for (const l of lines) {
    const source = /pool="([^"]*)"/.exec(l)?.[1] ?? '';
    bySource.set(source, (bySource.get(source) ?? 0) + Number(l.slice(l.lastIndexOf(' ') + 1)));
  }
  return bySource;
}

function batchFigures(text: string | undefined): Map<string, BatchFigures> {
  const out = new Map<string, BatchFigures>();
  const LINE = /^pixgate_batch_(items_count|items_sum|duration_seconds_sum)\{batcher="([a-z_]+)"(?:,phase="([a-z]+)")?\} (\S+)$/;
  for (const line of (text ?? '').split('\n')) {
    const m = LINE.exec(line);
    if (!m) continue;
    const [, what, batcher, phase, value] = m;
    const f = out.get(batcher!) ?? { batches: 0, items: 0, waitSeconds: 0, runSeconds: 0 };
    if (what === 'items_count') f.batches = Number(value);
    else if (what === 'items_sum') f.items = Number(value);
    else if (phase === 'wait') f.waitSeconds = Number(value);
    else if (phase === 'run') f.runSeconds = Number(value);
    out.set(batcher!, f);
  }
  return out;
}


/**
 * Runs CONCURRENCY loops for `seconds`, each sending `next()` until time is up; samples RSS. With
 * BENCH_TRACE, a run given a `traceName` writes its requests' start and latency there.
 */
async function run(t: Target, pool: Pool, seconds: number, next: () => BenchRequest, traceName?: string): Promise<RunResult> {
  const latencies: number[] = [];
  const starts: number[] = [];
  const statuses: Record<string, number> = {};
  const pids = t.pids();
  const maxRss = pids.map(() => 0);
  const sampler = setInterval(() => pids.forEach((pid, i) => (maxRss[i] = Math.max(maxRss[i]!, rssMb(pid) ?? 0))), 250);
  const metricsBefore = await t.metrics();
  const batchesBefore = batchFigures(metricsBefore);
  const statementsBefore = statementCounts(metricsBefore);
  const local = process.platform === 'linux' && !env.BENCH_URL;
  const cpuBefore = local ? cpuSnapshot(pids) : undefined;
  const started = performance.now();
  const until = started + seconds * 1000;
  const worker = async () => {
    while (performance.now() < until) {
      const req = next();
      const t0 = performance.now();
      const res = await pool.request(req);
      if (req.onBody) req.onBody(await res.body.text());
      else await res.body.dump();
      latencies.push(performance.now() - t0);
      starts.push(t0 - started);
      statuses[res.statusCode] = (statuses[res.statusCode] ?? 0) + 1;
    }
  };
  try {
    await Promise.all(Array.from({ length: CONCURRENCY }, worker));
  } finally {
    clearInterval(sampler);
  }
  const elapsed = (performance.now() - started) / 1000;
  if (env.BENCH_TRACE && traceName) {
    mkdirSync(env.BENCH_TRACE, { recursive: true });
    writeFileSync(join(env.BENCH_TRACE, `${traceName}.txt`), starts.map((s, i) => `${s.toFixed(1)} ${latencies[i]!.toFixed(1)}\n`).join(''));
  }
  const cpu = cpuBefore ? cpuBetween(cpuBefore, cpuSnapshot(pids)) : undefined;
  const metricsAfter = await t.metrics();
  const statementsAfter = statementCounts(metricsAfter);
  const statements = statementsBefore === undefined || statementsAfter === undefined ? undefined : new Map([...statementsAfter].map(([source, n]) => [source, n - (statementsBefore.get(source) ?? 0)]));
  const batches = new Map<string, BatchFigures>();
  for (const [name, after] of batchFigures(metricsAfter)) {
    const before = batchesBefore.get(name) ?? { batches: 0, items: 0, waitSeconds: 0, runSeconds: 0 };
    const d = { batches: after.batches - before.batches, items: after.items - before.items, waitSeconds: after.waitSeconds - before.waitSeconds, runSeconds: after.runSeconds - before.runSeconds };
    if (d.batches > 0) batches.set(name, d);
  }
  return { requests: latencies.length, seconds: elapsed, statuses, latenciesMs: latencies, maxRssMb: maxRss, cpu, batches, statements };
}

/** The request pipeline alone: GET /balance (stages 1-4, 7) and a signed POST /cpf/validate (all 8). */
function balances(m: Merchant) {
  return (): BenchRequest => ({ path: '/api/external/balance', method: 'GET', headers: { authorization: auth(m) } });
}

function cpfValidations(m: Merchant, version: 1 | 2) {
  const text = JSON.stringify({ cpf: '529.982.247-25' });
  const canonical = canonicalize(text);
  const runId = randomBytes(6).toString('hex');
  let seq = 0; // fresh nonce and Idempotency-Key for every request
  return (): BenchRequest => {
    const n = seq++;
    const headers: Record<string, string> = { authorization: auth(m), 'content-type': 'application/json' };
    if (version === 1) {
      headers.hmac = signV1(m.secret, canonical);
    } else {
      const timestamp = String(Math.floor(Date.now() / 1000));
      const nonce = `${runId}-${n}-nonce`;
      const idempotencyKey = `bench-${runId}-${n}`;
      Object.assign(headers, {
        'x-signature-version': '2',
        'x-request-timestamp': timestamp,
        'x-request-nonce': nonce,
        'idempotency-key': idempotencyKey,
        hmac: signV2(m.secret, { timestamp, nonce, method: 'POST', path: '/api/external/cpf/validate', idempotencyKey, canonicalBody: canonical }),
      });
    }
    return { path: '/api/external/cpf/validate', method: 'POST', headers, body: text };
  };
}

function sum(values: Iterable<number>): number {
  let total = 0;
  for (const v of values) total += v;
  return total;
}

function percentile(sorted: number[], p: number): number {
  if (sorted.length === 0) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;
}

const ms = (v: number) => `${v.toFixed(1)} ms`;

interface Row {
  workers: number;
  scenario: string;
  throughput: number;
  p99: number;
  versus: 'tpcb' | 'selectOnly' | null;
}
const summary: Row[] = [];

function report(workers: number, key: string, name: string, r: RunResult, versus: Row['versus']) {
  const sorted = [...r.latenciesMs].sort((a, b) => a - b);
  const throughput = r.requests / r.seconds;
  summary.push({ workers, scenario: name, throughput, p99: percentile(sorted, 99), versus });
  console.log(
    [
      `${name}`,
      `  requests      ${r.requests} in ${r.seconds.toFixed(1)} s`,
      `  throughput    ${throughput.toFixed(0)} requests/s`,
      `  latency       p50 ${ms(percentile(sorted, 50))}   p90 ${ms(percentile(sorted, 90))}   p99 ${ms(percentile(sorted, 99))}   max ${ms(sorted[sorted.length - 1] ?? NaN)}`,
      `  statuses      ${Object.entries(r.statuses).map(([s, n]) => `${s}: ${n}`).join(', ')}`,
      ...(r.maxRssMb.length ? [`  max RSS       ${r.maxRssMb.map((m) => `${m.toFixed(0)} MB`).join(', ')} (primary${r.maxRssMb.length > 1 ? ', workers' : ''})`] : []),
      // Where the machine's CPU went, per request; "cores busy" is at most the machine's cores
      // (the rest is idle).
      ...(r.cpu && r.requests
        ? [
            `  CPU/request   server ${((1000 * r.cpu.server) / r.requests).toFixed(2)} ms   PostgreSQL ${((1000 * r.cpu.postgres) / r.requests).toFixed(2)} ms   bench client ${((1000 * r.cpu.client) / r.requests).toFixed(2)} ms   (cores busy: ${((r.cpu.server + r.cpu.postgres + r.cpu.client) / r.seconds).toFixed(2)})`,
          ]
        : []),
      // Round trips to the database per request, background work included (settlements, fan-out).
      ...(r.statements !== undefined && r.requests
        ? [
            `  statements    ${(sum(r.statements.values()) / r.requests).toFixed(2)} per request (${[...r.statements]
              .filter(([, n]) => n > 0)
              .sort((a, b) => b[1] - a[1])
              .map(([source, n]) => `${source} ${(n / r.requests).toFixed(2)}`)
              .join(', ')})`,
          ]
        : []),
      // Group commit (pixgate_batch_*): a request spends about one mean wait and one mean run of
      // each batcher on its path; the wait is the time behind the batches already running.
      ...[...r.batches].map(
        ([name, f], i) =>
          `${i === 0 ? '  batches ' : '          '}      ${name.padEnd(19)} ${f.batches.toString().padStart(6)} x ${(f.items / f.batches).toFixed(1).padStart(5)} items   wait ${ms((f.waitSeconds * 1000) / f.batches)}   run ${ms((f.runSeconds * 1000) / f.batches)}`,
      ),
    ].join('\n'),
  );
  void key;
}

/** Statements per second of an idle server (no requests), from its own counter. */
async function idle(t: Target, workers: number): Promise<void> {
  await new Promise((r) => setTimeout(r, 3_000)); // let start-up work (migrations, first ticks) finish
  const total = async () => {
    const bySource = statementCounts(await t.metrics());
    return bySource && sum(bySource.values());
  };
  const a = await total();
  const t0 = performance.now();
  await new Promise((r) => setTimeout(r, 10_000));
  const b = await total();
  const seconds = (performance.now() - t0) / 1000;
  // The scrape itself issues no database statement; gauges read from the database would, so the
  // counter's own scrape is taken once at each end and its share (if any) is included honestly.
  if (a === undefined || b === undefined) console.log('idle: pixgate_db_statements_total not exposed by this server; skipped');
  else {
    const rate = (b - a) / seconds;
    console.log(`idle: ${rate.toFixed(1)} database statements/s over ${seconds.toFixed(0)} s (all processes, WEB_CONCURRENCY=${workers})`);
    summary.push({ workers, scenario: 'idle database statements/s', throughput: rate, p99: NaN, versus: null });
  }
}

/** Receipts of webhook deliveries at a local receiver. */
function webhookReceiver() {
  const received: { at: number; event: string; transactionId?: string; settledAt?: string }[] = [];
  const server = createHttpServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const at = Date.now();
      try {
        const body = JSON.parse(Buffer.concat(chunks).toString()) as { event: string; transaction_id?: string; settled_at?: string };
        received.push({ at, event: body.event, ...(body.transaction_id ? { transactionId: body.transaction_id } : {}), ...(body.settled_at ? { settledAt: body.settled_at } : {}) });
      } catch {
        // not ours
      }
      res.writeHead(200).end();
    });
  });
  return { server, received };
}

async function webhookScenario(t: Target, workers: number, pool: Pool, pixKey: string, receiver: ReturnType<typeof webhookReceiver>, port: number) {
  // Ten accounts, each with a webhook for its payout events: every cash-out is delivered twice
  // (pix.payout.processing at once, pix.payout.confirmed after settlement).
  const accounts = await Promise.all(Array.from({ length: 10 }, () => merchant(t)));
  const registration = JSON.stringify({ url: `http://127.0.0.1:${port}/hook`, events: ['pix.payout.processing', 'pix.payout.confirmed'], allow_insecure: true });
  for (const m of accounts) {
    const r = await fetch(`${t.url}/api/external/webhooks`, {
      method: 'POST',
      headers: { authorization: auth(m), 'content-type': 'application/json', hmac: signV1(m.secret, canonicalize(registration)) },
      body: registration,
    });
    if (r.status !== 201) throw new Error(`webhook registration: ${r.status} ${await r.text()}`);
  }
  const answeredAt = new Map<string, number>();
  const next = cashOuts(accounts, pixKey, (b) => b.transaction_id && measuring && answeredAt.set(b.transaction_id, Date.now()));
  // Warm-up and ANALYZE as for the other scenarios (webhook_deliveries then has statistics); only
  // the deliveries of the measured run's cash-outs are counted.
  let measuring = false;
  await run(t, pool, WARMUP_SECONDS, next);
  if (env.BENCH_ANALYZE !== '0') await t.analyze();
  measuring = true;
  receiver.received.length = 0;
  const started = Date.now();
  const r = await run(t, pool, SECONDS, next, `${workers}-webhooks`);
  // Let the last settlements and deliveries arrive: until every expected delivery is in, or 30 s
  // without progress; the drain time after the load stopped is printed.
  const loadEnded = Date.now();
  let lastCount = -1;
  let lastProgress = Date.now();
  const measured = () => receiver.received.filter((x) => x.transactionId && answeredAt.has(x.transactionId));
  while (measured().length < 2 * answeredAt.size && Date.now() - lastProgress < 30_000) {
    const count = receiver.received.length;
    if (count !== lastCount) {
      lastCount = count;
      lastProgress = Date.now();
    }
    await new Promise((res) => setTimeout(res, 100));
  }
  const drainMs = Date.now() - loadEnded;
  const mine = measured();
  const processing = mine.filter((x) => x.event === 'pix.payout.processing' && x.transactionId && answeredAt.has(x.transactionId));
  const confirmed = mine.filter((x) => x.event === 'pix.payout.confirmed' && x.settledAt);
  const delays = (xs: number[]) => xs.sort((a, b) => a - b);
  const dProcessing = delays(processing.map((x) => Math.max(0, x.at - answeredAt.get(x.transactionId!)!)));
  const dConfirmed = delays(confirmed.map((x) => Math.max(0, x.at - Date.parse(x.settledAt!))));
  const last = Math.max(...mine.map((x) => x.at), started);
  report(workers, 'webhooks', 'cash-out, 10 accounts each with a webhook (processing + confirmed)', r, 'tpcb');
  console.log(
    [
      `  drained       ${mine.length === 2 * answeredAt.size ? `all delivered ${(drainMs / 1000).toFixed(1)} s after the load stopped` : `NOT all delivered: ${2 * answeredAt.size - mine.length} missing 30 s after the last receipt`}`,
      `  deliveries    ${mine.length} received of ${2 * answeredAt.size} expected (${processing.length} processing, ${confirmed.length} confirmed), ${(mine.length / ((last - started) / 1000)).toFixed(0)}/s`,
      `  processing    answer -> receipt   p50 ${ms(percentile(dProcessing, 50))}   p99 ${ms(percentile(dProcessing, 99))}`,
      `  confirmed     settled_at -> receipt  p50 ${ms(percentile(dConfirmed, 50))}   p99 ${ms(percentile(dConfirmed, 99))}`,
    ].join('\n'),
  );
  summary.push({ workers, scenario: 'webhook deliveries/s (p99 state change -> receipt, processing)', throughput: mine.length / ((last - started) / 1000), p99: percentile(dProcessing, 99), versus: null });
}

async function benchServer(workers: number, receiver: ReturnType<typeof webhookReceiver>, webhookPort: number) {
  const t = await startTarget(workers, webhookPort);
  try {
    console.log(`\n== ${t.describe}`);
    if (!env.BENCH_URL) await idle(t, workers);
    const pixKey = `bench-${randomBytes(4).toString('hex')}@example.com`;
    await call(t, 'sandbox', 'POST', '/dict/keys', { key: pixKey, type: 'email', name: 'Bench Receiver', document: '52998224725', ispb: '18236120' });
    const many = await Promise.all(Array.from({ length: ACCOUNTS }, () => merchant(t)));
    const hot = [await merchant(t)];
    const pool = new Pool(t.url, { connections: CONCURRENCY, pipelining: 1 });
    const scenarios: [string, string, () => BenchRequest, Row['versus']][] = [
      ['many', `cash-out, many accounts (${ACCOUNTS}, round robin)`, cashOuts(many, pixKey), 'tpcb'],
      ['hot', 'cash-out, one hot account', cashOuts(hot, pixKey), 'tpcb'],
      ['balance', 'pipeline only: GET /balance (credentials, whitelist, permission)', balances(many[0]!), 'selectOnly'],
      ['v1', 'pipeline only: POST /cpf/validate signed v1 (all eight stages)', cpfValidations(many[0]!, 1), null],
      ['v2', 'pipeline only: POST /cpf/validate signed v2 + Idempotency-Key (nonce in Redis, idempotency record)', cpfValidations(many[0]!, 2), null],
    ];
    try {
      for (const [key, name, next, versus] of scenarios) {
        if (!wanted(key)) continue;
        await run(t, pool, WARMUP_SECONDS, next);
        if (env.BENCH_ANALYZE !== '0') await t.analyze();
        report(workers, key, name, await run(t, pool, SECONDS, next, `${workers}-${key}`), versus);
      }
      if (wanted('webhooks') && !env.BENCH_URL) await webhookScenario(t, workers, pool, pixKey, receiver, webhookPort);
    } finally {
      await pool.close();
    }
  } finally {
    await t.stop();
  }
}

async function main() {
  const usePgbench = env.BENCH_PGBENCH !== '0';
  console.log(`pixgate bench: concurrency ${CONCURRENCY}, ${SECONDS} s per run after ${WARMUP_SECONDS} s warm-up, cash-outs signed with HMAC v1`);
  let before: PgbenchFigures | undefined;
  let after: PgbenchFigures | undefined;
  if (usePgbench) {
    await pgbenchInit();
    before = pgbench('before');
  }
  const receiver = webhookReceiver();
  await new Promise<void>((r) => receiver.server.listen(0, '127.0.0.1', r));
  const webhookPort = (receiver.server.address() as AddressInfo).port;
  try {
    for (const workers of env.BENCH_URL ? [1] : WORKER_COUNTS) await benchServer(workers, receiver, webhookPort);
  } finally {
    receiver.server.close();
  }
  if (usePgbench) {
    after = pgbench('after');
    await pgbenchDrop();
  }
  if (env.BENCH_CPU_PROF) printCpuProfile(env.BENCH_CPU_PROF);
  console.log('\n== summary' + (before && after ? ' (ratio: against the mean of the pgbench runs before and after)' : ''));
  const base = before && after ? { tpcb: (before.tpcb + after.tpcb) / 2, selectOnly: (before.selectOnly + after.selectOnly) / 2 } : undefined;
  if (base) console.log(`pgbench mean: TPC-B ${base.tpcb.toFixed(0)} tps, select-only ${base.selectOnly.toFixed(0)} tps`);
  for (const row of summary) {
    const ratio = base && row.versus ? `  ${((100 * row.throughput) / base[row.versus]).toFixed(1)}% of ${row.versus === 'tpcb' ? 'TPC-B' : 'select-only'}` : '';
    const p99 = Number.isNaN(row.p99) ? '' : `  p99 ${ms(row.p99)}`;
    console.log(`WEB_CONCURRENCY=${row.workers}  ${row.scenario.padEnd(60)} ${row.throughput.toFixed(row.throughput < 100 ? 1 : 0).padStart(7)}/s${p99}${ratio}`);
  }
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
