/** One measured run: CONCURRENCY loops sending requests for a time, with RSS, CPU, statements and group-commit batches sampled. */
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import type { Pool } from 'undici';
import type { BenchRequest } from '../lib.js';
import { CONCURRENCY, env } from './config.js';
import { cpuBetween, cpuSnapshot, rssMb, type CpuFigures } from './procfs.js';
import type { Target } from './target.js';

export interface RunResult {
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

export interface BatchFigures {
  batches: number;
  items: number;
  waitSeconds: number;
  runSeconds: number;
}

/**
 * Database statements so far by source (request, background, rail, listen; summed over workers)
 * from the Prometheus text of pixgate_db_statements_total, or undefined if it has none.
 */
export function statementCounts(text: string | undefined): Map<string, number> | undefined {
  const lines = (text ?? '').split('\n').filter((l) => l.startsWith('pixgate_db_statements_total'));
  if (lines.length === 0) return undefined;
  const bySource = new Map<string, number>();
  for (const l of lines) {
    const source = /pool="([^"]*)"/.exec(l)?.[1] ?? '';
    bySource.set(source, (bySource.get(source) ?? 0) + Number(l.slice(l.lastIndexOf(' ') + 1)));
  }
  return bySource;
}

/** The pixgate_batch_* counters of a scrape, by batcher. */
export function batchFigures(text: string | undefined): Map<string, BatchFigures> {
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
export async function run(t: Target, pool: Pool, seconds: number, next: () => BenchRequest, traceName?: string): Promise<RunResult> {
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
