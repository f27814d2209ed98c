/** The report of a chaos run: operations and refusals tallied, figures of time, anomalies found outside the audit, and its text. */
import { readFileSync } from 'node:fs';
import type { Anomaly } from './audit.js';
import type { FaultWindow } from './faults.js';
import type { PixgateServer } from './infra.js';
import type { Op, Workload } from './workload.js';

export interface ChaosReport {
  seed: number;
  figures: Record<string, number>;
  operations: Record<string, { sent: number; acknowledged: number; refused: number; unresolved: number }>;
  anomalies: Anomaly[];
  /** Anomalies by check; refusals (final 4xx answers) by status and code; faults by kind. */
  byCheck: Record<string, number>;
  refusals: Record<string, number>;
  faults: Record<string, number>;
  stallSupported: boolean;
  dir: string;
}

/** What the run itself saw go wrong, beside the audit: the clients' notes, server and worker deaths, keys still answering 409. */
export function runAnomalies(workload: Workload, server: PixgateServer, t0: number): Anomaly[] {
  const anomalies: Anomaly[] = [];
  for (const n of workload.notes) anomalies.push({ check: n.check ?? (n.what === 'client error' ? 'harness' : 'answer'), detail: `${n.op}: ${n.what}: ${n.detail}` });
  for (const e of server.unexpectedExits) anomalies.push({ check: 'server_exit', detail: `pixgate exited on its own (code ${e.code}, signal ${e.signal}) at +${((e.at - t0) / 1000).toFixed(1)}s; see ${server.logFile}` });
  for (const w of workerDeaths(server.logFile)) anomalies.push({ check: 'server_exit', detail: `a cluster worker (pid ${w.pid}) died by itself (code ${w.code}, signal ${w.signal}); see ${server.logFile}` });
  for (const op of workload.ops) {
    if (!op.acked && !op.refused && op.retryable) {
      const last = op.answers.at(-1);
      if (last?.status === 409) anomalies.push({ check: 'key_stuck', detail: `${op.id} (${op.kind}, key ${op.idempotencyKey}) still answered 409 after the drain` });
    }
  }
  return anomalies;
}

/** Anomalies by check. */
export function countByCheck(anomalies: Anomaly[]): Record<string, number> {
  const byCheck: Record<string, number> = {};
  for (const a of anomalies) byCheck[a.check] = (byCheck[a.check] ?? 0) + 1;
  return byCheck;
}

/** Operations by kind (and signing, key, external_id): sent, acknowledged, refused, unresolved. */
export function tallyOperations(ops: Op[]): ChaosReport['operations'] {
  const operations: ChaosReport['operations'] = {};
  for (const op of ops) {
    const k = `${op.kind}${op.kind === 'cash_out' || op.kind === 'tef' || op.kind === 'refund' || op.kind === 'charge' ? ` (${op.sign}${op.idempotencyKey ? ', key' : ''}${op.externalId ? ', external_id' : ''})` : ''}`;
    const e = (operations[k] ??= { sent: 0, acknowledged: 0, refused: 0, unresolved: 0 });
    e.sent++;
    if (op.acked) e.acknowledged++;
    else if (op.refused) e.refused++;
    else e.unresolved++;
  }
  return operations;
}

/** Refusals (final 4xx answers) by operation, status and code. */
export function tallyRefusals(ops: Op[]): Record<string, number> {
  const refusals: Record<string, number> = {};
  for (const op of ops) {
    if (!op.refused) continue;
    let code = '';
    try {
      code = JSON.parse(op.refused.text)?.code ?? '';
    } catch {
      // not JSON
    }
    const k = `${op.kind} ${op.refused.status}${code ? ` ${code}` : ''}`;
    refusals[k] = (refusals[k] ?? 0) + 1;
  }
  return refusals;
}

export function formatReport(r: ChaosReport): string {
  const lines = [`chaos run, seed ${r.seed}${r.stallSupported ? '' : ' (rail stall switch absent: stall fault skipped)'}`, '', 'operations (sent / acknowledged / refused / unresolved):'];
  for (const [k, v] of Object.entries(r.operations).sort()) lines.push(`  ${k.padEnd(40)} ${String(v.sent).padStart(6)} ${String(v.acknowledged).padStart(6)} ${String(v.refused).padStart(6)} ${String(v.unresolved).padStart(6)}`);
  lines.push('', 'figures:');
  for (const [k, v] of Object.entries(r.figures)) lines.push(`  ${k.padEnd(28)} ${v}`);
  lines.push('', 'faults injected:');
  for (const [k, v] of Object.entries(r.faults)) lines.push(`  ${k.padEnd(28)} ${v}`);
  lines.push('', 'refusals (final 4xx answers) by operation, status and code:');
  for (const [k, v] of Object.entries(r.refusals).sort()) lines.push(`  ${k.padEnd(50)} ${v}`);
  lines.push('', 'anomalies by check:');
  for (const [k, v] of Object.entries(r.byCheck).sort()) lines.push(`  ${k.padEnd(28)} ${v}`);
  lines.push('', `anomalies: ${r.anomalies.length}`);
  for (const a of r.anomalies.slice(0, 200)) lines.push(`  [${a.check}] ${a.detail}`);
  if (r.anomalies.length > 200) lines.push(`  … ${r.anomalies.length - 200} more`);
  if (r.anomalies.length > 0) lines.push('', `logs kept in ${r.dir}; replay with: npm run chaos -- --seed ${r.seed}`);
  return lines.join('\n');
}

/**
 * Figures of time (not anomalies: the machine's load moves them): answers' p50 and p99 in ms, and
 * the requests that got no answer within the client's deadline, by what was going on when they
 * were sent — a fault that stops the server or PostgreSQL or stalls the rail (plus 2 s), a hung
 * Redis (which must fail fast like a stopped one, issue 24, 17), or nothing.
 */
export function answerTimes(ops: Op[], windows: FaultWindow[], timeoutMs: number): Record<string, number> {
  const answered = ops.flatMap((op) => op.answers.filter((a) => a.status !== 0 && a.ms !== undefined));
  const hung = (a: { at: number; ms?: number }) => windows.some((w) => w.kind === 'redis_hangs' && a.at - (a.ms ?? 0) <= w.to && a.at >= w.from);
  const quantile = (xs: number[], q: number) => (xs.length ? xs[Math.min(xs.length - 1, Math.floor(q * xs.length))]! : 0);
  const all = answered.map((a) => a.ms!).sort((a, b) => a - b);
  const duringHangs = answered.filter(hung).map((a) => a.ms!).sort((a, b) => a - b);
  const out = {
    answer_ms_p50: quantile(all, 0.5),
    answer_ms_p99: quantile(all, 0.99),
    answers_during_redis_hangs: duringHangs.length,
    answer_ms_p50_during_redis_hangs: quantile(duringHangs, 0.5),
    answer_ms_max_during_redis_hangs: duringHangs.at(-1) ?? 0,
    timeouts_during_faults: 0,
    timeouts_during_redis_hangs: 0,
    timeouts_outside_faults: 0,
  };
  for (const op of ops) {
    for (const a of op.answers) {
      if (a.error !== 'client timeout') continue;
      const sent = a.at - (a.ms ?? timeoutMs);
      const during = windows.filter((w) => sent <= w.to + 2000 && a.at >= w.from);
      if (during.some((w) => w.kind !== 'redis_hangs' && w.kind !== 'clock_steps')) out.timeouts_during_faults++;
      else if (during.some((w) => w.kind === 'redis_hangs')) out.timeouts_during_redis_hangs++;
      else out.timeouts_outside_faults++;
    }
  }
  return out;
}

/** Cluster workers that died by themselves: the primary logs every death; ours are SIGKILLs. */
export function workerDeaths(logFile: string): { pid: number; code: number | null; signal: string | null }[] {
  let text = '';
  try {
    text = readFileSync(logFile, 'utf8');
  } catch {
    return [];
  }
  const out: { pid: number; code: number | null; signal: string | null }[] = [];
  for (const line of text.split('\n')) {
    if (!line.includes('worker died')) continue;
    try {
      const j = JSON.parse(line) as { pid?: number; code?: number | null; signal?: string | null };
      if (j.signal !== 'SIGKILL') out.push({ pid: j.pid ?? 0, code: j.code ?? null, signal: j.signal ?? null });
    } catch {
      // not a JSON line
    }
  }
  return out;
}

export function readLogTail(file: string, chars = 4000): string {
  try {
    return readFileSync(file, 'utf8').slice(-chars);
  } catch {
    return '';
  }
}
