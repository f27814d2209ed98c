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
import { randomBytes } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import { Pool } from 'undici';
import { call, cashOuts, merchant, printCpuProfile, type BenchRequest } from './lib.js';
import { ACCOUNTS, CONCURRENCY, env, SECONDS, wanted, WARMUP_SECONDS, WORKER_COUNTS } from './run/config.js';
import { run } from './run/measure.js';
import { pgbench, pgbenchDrop, pgbenchInit, type PgbenchFigures } from './run/pgbench.js';
import { balances, cpfValidations, idle, webhookReceiver, webhookScenario } from './run/scenarios.js';
import { printSummary, report, type Row } from './run/summary.js';
import { startTarget } from './run/target.js';

// The parts: run/config.ts (settings), run/target.ts (the server measured), run/measure.ts (one
// measured run), run/procfs.ts (RSS and CPU), run/pgbench.ts, run/scenarios.ts, run/summary.ts.

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
  printSummary(before, after);
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
