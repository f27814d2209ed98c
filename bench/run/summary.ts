/** The figures printed: one block per measured run, and the summary with ratios to pgbench. */
import type { RunResult } from './measure.js';
import type { PgbenchFigures } from './pgbench.js';

export function sum(values: Iterable<number>): number {
  let total = 0;
  for (const v of values) total += v;
  return total;
}

export function percentile(sorted: number[], p: number): number {
  if (sorted.length === 0) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;
}

export const ms = (v: number) => `${v.toFixed(1)} ms`;

export interface Row {
  workers: number;
  scenario: string;
  throughput: number;
  p99: number;
  versus: 'tpcb' | 'selectOnly' | null;
}
export const summary: Row[] = [];

export function report(workers: number, key: string, name: string, r: RunResult, versus: Row['versus']) {
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

/** The summary: every scenario's throughput (and p99), with its ratio to the mean of the pgbench runs before and after. */
export function printSummary(before: PgbenchFigures | undefined, after: PgbenchFigures | undefined): void {
  console.log('\n== summary' + (before && after ? ' (ratio: against the mean of the pgbench runs before and after)' : ''));
  const base = before && after ? { tpcb: (before.tpcb + after.tpcb) / 2, selectOnly: (before.selectOnly + after.selectOnly) / 2 } : undefined;
  if (base) console.log(`pgbench mean: TPC-B ${base.tpcb.toFixed(0)} tps, select-only ${base.selectOnly.toFixed(0)} tps`);
  for (const row of summary) {
    const ratio = base && row.versus ? `  ${((100 * row.throughput) / base[row.versus]).toFixed(1)}% of ${row.versus === 'tpcb' ? 'TPC-B' : 'select-only'}` : '';
    const p99 = Number.isNaN(row.p99) ? '' : `  p99 ${ms(row.p99)}`;
    console.log(`WEB_CONCURRENCY=${row.workers}  ${row.scenario.padEnd(60)} ${row.throughput.toFixed(row.throughput < 100 ? 1 : 0).padStart(7)}/s${p99}${ratio}`);
  }
}
