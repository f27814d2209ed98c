/**
 * npm run bench — signed cash-outs against pixgate on PostgreSQL and Redis; prints requests/s and
 * latency percentiles for many accounts and for one hot account, then the request pipeline alone
 * (GET /balance, signed POST /cpf/validate with v1 and with v2). Figures only, no pass/fail.
 *
 * By default it starts a server (src/main.ts through tsx) on a fresh schema of the PostgreSQL
 * database and the Redis below, and drops the schema afterwards. To target a running server
 * instead, set BENCH_URL and BENCH_ADMIN_TOKEN (its sandbox must be on: APP_ENV other than
 * production).
 *
 *   BENCH_DATABASE_URL   postgres://postgres@127.0.0.1:5432/test  (or TEST_DATABASE_URL)
 *   BENCH_REDIS_URL      redis://127.0.0.1:6379                   (or TEST_REDIS_URL)
 *   BENCH_WORKERS        1     WEB_CONCURRENCY of the started server
 *   BENCH_ACCOUNTS       50    accounts of the "many accounts" run
 *   BENCH_CONCURRENCY    32    requests in flight
 *   BENCH_SECONDS        10    length of each run (after 2 s of warm-up)
 *   BENCH_SETTLEMENT_MS  1600  SIM_SETTLEMENT_MS of the started server
 *   BENCH_ONLY                 run only the scenarios whose name contains this text
 *                              (e.g. BENCH_ONLY=pipeline for the three pipeline-only runs)
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import pg from 'pg';
import { Pool } from 'undici';
import { signV1, signV2 } from '../src/auth/hmac.js';
import { canonicalize } from '../src/lib/canonicalJson.js';
import { packageRoot } from '../src/lib/paths.js';

const env = process.env;
const int = (name: string, fallback: number) => (env[name] ? Number(env[name]) : fallback);
const ACCOUNTS = int('BENCH_ACCOUNTS', 50);
const CONCURRENCY = int('BENCH_CONCURRENCY', 32);
const SECONDS = int('BENCH_SECONDS', 10);
const WARMUP_SECONDS = 2;

interface Target {
  url: string;
  adminToken: string;
  stop(): Promise<void>;
  describe: string;
}

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address() as { port: number };
      srv.close(() => resolve(port));
    });
    srv.on('error', reject);
  });
}

async function startTarget(): Promise<Target> {
  if (env.BENCH_URL) {
    if (!env.BENCH_ADMIN_TOKEN) throw new Error('BENCH_URL needs BENCH_ADMIN_TOKEN');
    return { url: env.BENCH_URL.replace(/\/$/, ''), adminToken: env.BENCH_ADMIN_TOKEN, stop: async () => {}, describe: `target ${env.BENCH_URL}` };
  }
  const dbUrl = env.BENCH_DATABASE_URL ?? env.TEST_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
  const redisUrl = env.BENCH_REDIS_URL ?? env.TEST_REDIS_URL ?? 'redis://127.0.0.1:6379';
  const schema = `bench_${Date.now().toString(36)}`;
  const admin = new pg.Client({ connectionString: dbUrl });
  await admin.connect();
  await admin.query(`CREATE SCHEMA ${schema}`);
  await admin.end();
  const port = await freePort();
  const adminToken = `bench-${randomBytes(12).toString('hex')}`;
  const workers = int('BENCH_WORKERS', 1);
  const child: ChildProcess = spawn(process.execPath, ['--import', 'tsx', join(packageRoot, 'src', 'main.ts')], {
    env: {
      PATH: env.PATH ?? '',
      PORT: String(port),
      DATABASE_URL: `${dbUrl}${dbUrl.includes('?') ? '&' : '?'}options=${encodeURIComponent(`-c search_path=${schema}`)}`,
      REDIS_URL: redisUrl,
      ADMIN_TOKEN: adminToken,
      WEB_CONCURRENCY: String(workers),
      RATE_LIMIT_PER_MINUTE: '100000000',
      SIM_SETTLEMENT_MS: String(int('BENCH_SETTLEMENT_MS', 1600)),
      LOG_LEVEL: 'warn',
    },
    stdio: ['ignore', 'inherit', 'inherit'],
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
    describe: `started pixgate (WEB_CONCURRENCY=${workers}) on PostgreSQL schema ${schema} and Redis ${redisUrl}`,
    async stop() {
      child.kill('SIGTERM');
      await new Promise((r) => child.once('exit', r));
      const c = new pg.Client({ connectionString: dbUrl });
      await c.connect();
      await c.query(`DROP SCHEMA ${schema} CASCADE`);
      await c.end();
    },
  };
}

async function call(t: Target, prefix: string, method: string, path: string, body?: unknown): Promise<any> {
  const res = await fetch(`${t.url}/api/${prefix}${path}`, {
    method,
    headers: { authorization: `Bearer ${t.adminToken}`, ...(body ? { 'content-type': 'application/json' } : {}) },
    ...(body ? { body: JSON.stringify(body) } : {}),
  });
  const json = await res.json();
  if (res.status >= 300) throw new Error(`${method} ${path}: ${res.status} ${JSON.stringify(json)}`);
  return json;
}

interface Merchant {
  accountId: number;
  clientId: string;
  secret: string;
}

let documentSeq = 0;
function cnpj(): string {
  const twelve = `${String(10_000_000 + ((Date.now() + documentSeq++ * 7919) % 89_999_999)).slice(0, 8)}0001`;
  const digit = (d: string, w: number[]) => {
    const r = w.reduce((a, x, i) => a + x * Number(d[i]), 0) % 11;
    return r < 2 ? 0 : 11 - r;
  };
  const w1 = [5, 4, 3, 2, 9, 8, 7, 6, 5, 4, 3, 2];
  const d1 = digit(twelve, w1);
  return `${twelve}${d1}${digit(twelve + d1, [6, ...w1])}`;
}

async function merchant(t: Target): Promise<Merchant> {
  const m = await call(t, 'admin', 'POST', '/merchants', { name: 'Bench', document: cnpj() });
  await call(t, 'admin', 'POST', `/accounts/${m.account_id}/deposits`, { amount: 10_000_000_000 });
  await call(t, 'admin', 'PATCH', `/accounts/${m.account_id}`, {
    cash_out_daily_limit_cents: 1_000_000_000_000,
    cash_out_nighttime_limit_cents: 1_000_000_000_000,
  });
  const k = await call(t, 'admin', 'POST', '/api-keys', {
    merchant_id: m.merchant_id,
    account_id: m.account_id,
    permissions: ['transfer:write', 'transfer:read', 'account:read'],
    ip_whitelist: ['127.0.0.1', '::1'],
  });
  return { accountId: m.account_id, clientId: k.client_id, secret: k.client_secret };
}

interface RunResult {
  requests: number;
  seconds: number;
  statuses: Record<string, number>;
  latenciesMs: number[];
}

interface BenchRequest {
  path: string;
  method: 'GET' | 'POST';
  headers: Record<string, string>;
  body?: string;
}

/** Runs CONCURRENCY loops for `seconds`, each sending `next()` until time is up. */
async function run(pool: Pool, seconds: number, next: () => BenchRequest): Promise<RunResult> {
  const latencies: number[] = [];
  const statuses: Record<string, number> = {};
  const started = performance.now();
  const until = started + seconds * 1000;
  const worker = async () => {
    while (performance.now() < until) {
      const req = next();
      const t0 = performance.now();
      const res = await pool.request(req);
      await res.body.dump();
      latencies.push(performance.now() - t0);
      statuses[res.statusCode] = (statuses[res.statusCode] ?? 0) + 1;
    }
  };
  await Promise.all(Array.from({ length: CONCURRENCY }, worker));
  return { requests: latencies.length, seconds: (performance.now() - started) / 1000, statuses, latenciesMs: latencies };
}

const auth = (m: Merchant) => `ApiKey ${m.clientId}:${m.secret}`;

/** A signed cash-out of 1 to 50 cents, round robin over `merchants`. */
function cashOuts(merchants: Merchant[], pixKey: string) {
  const runId = randomBytes(4).toString('hex');
  let seq = 0; // never repeats across warm-up and measured runs: every cash-out is a new order
  return (): BenchRequest => {
    const n = seq++;
    const m = merchants[n % merchants.length]!;
    const text = JSON.stringify({ amount: 1 + (n % 50), external_id: `b-${runId}-${n}`, pix_key: pixKey });
    return {
      path: '/api/external/pix/cash-out',
      method: 'POST',
      headers: { authorization: auth(m), 'content-type': 'application/json', hmac: signV1(m.secret, canonicalize(text)) },
      body: text,
    };
  };
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

function percentile(sorted: number[], p: number): number {
  if (sorted.length === 0) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;
}

function report(name: string, r: RunResult) {
  const sorted = [...r.latenciesMs].sort((a, b) => a - b);
  const f = (ms: number) => `${ms.toFixed(1)} ms`;
  console.log(
    [
      `${name}`,
      `  requests      ${r.requests} in ${r.seconds.toFixed(1)} s`,
      `  throughput    ${(r.requests / r.seconds).toFixed(0)} requests/s`,
      `  latency       p50 ${f(percentile(sorted, 50))}   p90 ${f(percentile(sorted, 90))}   p99 ${f(percentile(sorted, 99))}   max ${f(sorted[sorted.length - 1] ?? NaN)}`,
      `  statuses      ${Object.entries(r.statuses).map(([s, n]) => `${s}: ${n}`).join(', ')}`,
    ].join('\n'),
  );
}

async function main() {
  const t = await startTarget();
  try {
    console.log(`pixgate bench: ${t.describe}`);
    console.log(`concurrency ${CONCURRENCY}, ${SECONDS} s per run after ${WARMUP_SECONDS} s warm-up, cash-outs signed with HMAC v1\n`);
    const pixKey = `bench-${randomBytes(4).toString('hex')}@example.com`;
    await call(t, 'sandbox', 'POST', '/dict/keys', { key: pixKey, type: 'email', name: 'Bench Receiver', document: '52998224725', ispb: '18236120' });
    const many = await Promise.all(Array.from({ length: ACCOUNTS }, () => merchant(t)));
    const hot = [await merchant(t)];
    const pool = new Pool(t.url, { connections: CONCURRENCY, pipelining: 1 });
    const scenarios: [string, () => BenchRequest][] = [
      [`cash-out, many accounts (${ACCOUNTS}, round robin)`, cashOuts(many, pixKey)],
      ['cash-out, one hot account', cashOuts(hot, pixKey)],
      ['pipeline only: GET /balance (credentials, whitelist, permission)', balances(many[0]!)],
      ['pipeline only: POST /cpf/validate signed v1 (all eight stages)', cpfValidations(many[0]!, 1)],
      ['pipeline only: POST /cpf/validate signed v2 + Idempotency-Key (nonce in Redis, idempotency record)', cpfValidations(many[0]!, 2)],
    ];
    try {
      for (const [name, next] of scenarios) {
        if (env.BENCH_ONLY && !name.includes(env.BENCH_ONLY)) continue;
        await run(pool, WARMUP_SECONDS, next);
        report(name, await run(pool, SECONDS, next));
      }
    } finally {
      await pool.close();
    }
  } finally {
    await t.stop();
  }
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
