/**
 * The faults of a chaos run (docs/chaos.md), injected one at a time at seeded random moments until
 * every minimum is met and the time is up: SIGKILL of the server or of one cluster worker, PostgreSQL
 * stopped or its postmaster SIGKILLed, Redis stopped or frozen, the rail stalled, the servers' wall
 * clock stepped.
 */
import { writeFileSync } from 'node:fs';
import type { Anomaly } from './audit.js';
import { clientClock, type Operator } from './client.js';
import { sleep, type PixgateServer, type PostgresCluster, type RedisServer } from './infra.js';

/** Faults injected so far (or wanted at least), by kind. */
export interface FaultCounts {
  kills: number;
  worker_kills: number;
  pg_restarts: number;
  pg_kills: number;
  redis_stops: number;
  redis_hangs: number;
  stalls: number;
  clock_steps: number;
}
export type FaultKind = keyof FaultCounts;

export const noFaults = (): FaultCounts => ({ kills: 0, worker_kills: 0, pg_restarts: 0, pg_kills: 0, redis_stops: 0, redis_hangs: 0, stalls: 0, clock_steps: 0 });

/** When a fault was going on: answers' times are read against these (figures of time). */
export interface FaultWindow {
  kind: string;
  from: number;
  to: number;
}

/** The servers' wall-clock offset (CHAOS_CLOCK_FILE, read by wallClock.mjs), also applied to the clients' signatures. */
export class ServerClock {
  offsetMs = 0;
  constructor(private readonly file: string) {
    writeFileSync(file, '0');
  }
  set(ms: number): void {
    this.offsetMs = ms;
    writeFileSync(this.file, String(ms));
    clientClock.offsetMs = ms;
  }
}

/** What the faults act on, and where they are counted. */
export interface FaultTargets {
  server: PixgateServer;
  pgc: PostgresCluster;
  redis: RedisServer;
  operator: Operator;
  clock: ServerClock;
  random: () => number;
  log: (line: string) => void;
  stallSupported: boolean;
  faults: FaultCounts;
  /** Times after which a webhook result may not have been recorded (input of the audit). */
  faultTimes: number[];
  anomalies: Anomaly[];
}

/** Cumulative probabilities of the fault kinds drawn at each step (kills most often). */
const FAULT_WEIGHTS: Record<string, number> = {
  kills: 0.45,
  worker_kills: 0.53,
  pg_restarts: 0.62,
  pg_kills: 0.7,
  redis_stops: 0.78,
  redis_hangs: 0.86,
  stalls: 0.93,
  clock_steps: 1,
};

const between = (t: FaultTargets, a: number, b: number) => a + t.random() * (b - a);

/**
 * Injects faults until every minimum of `want` is met and `durationMs` is up; after each fault
 * injected, runs `afterFault`. Returns the windows during which each fault went on.
 */
export async function injectFaults(t: FaultTargets, want: FaultCounts, durationMs: number, afterFault: () => Promise<void>): Promise<FaultWindow[]> {
  const faultStart = Date.now();
  const windows: FaultWindow[] = [];
  while (Object.entries(want).some(([k, n]) => t.faults[k as FaultKind] < n) || Date.now() - faultStart < durationMs) {
    await sleep(between(t, 1500, 5000));
    const kind = drawFault(t, want, Date.now() - faultStart >= durationMs);
    const faultFrom = Date.now();
    if (!(await INJECT[kind](t))) continue;
    if (!t.server.alive()) {
      t.log('server found dead after a fault: restarting');
      await t.server.start();
    }
    windows.push({ kind, from: faultFrom, to: Date.now() });
    await afterFault();
  }
  return windows;
}

/** The next fault: kills are the most frequent; the others come in when they are behind their minimum or by chance. */
function drawFault(t: FaultTargets, want: FaultCounts, overtime: boolean): FaultKind {
  const behind = Object.entries(want).filter(([k, n]) => t.faults[k as FaultKind] < n).map(([k]) => k);
  const roll = t.random();
  let kind = (Object.entries(FAULT_WEIGHTS).find(([, upTo]) => roll < upTo) ?? ['kills'])[0];
  // A minimum of 0 turns a fault off (and stalls without the switch, worker kills without a cluster).
  if (want[kind as FaultKind] === 0) kind = 'kills';
  // Once the time is up, only faults still behind their minimum are drawn, so a short run ends soon.
  if (behind.length > 0 && !behind.includes(kind) && (overtime || t.random() < 0.5)) kind = behind[Math.floor(t.random() * behind.length)]!;
  return kind as FaultKind;
}

/** Turns the rail stall off (retried while the server is restarting); an anomaly if it never answers. */
export async function ensureStallCleared(t: Pick<FaultTargets, 'operator' | 'stallSupported' | 'anomalies'>): Promise<void> {
  if (!t.stallSupported) return;
  for (let i = 0; i < 100; i++) {
    const a = await t.operator.call('sandbox', 'PUT', '/rail/stall', { delay_ms: 0, drop: false }, 5000);
    if (a.status === 200) return;
    await sleep(500);
  }
  t.anomalies.push({ check: 'harness', detail: 'could not clear the rail stall' });
}

/** One injection per kind; false when the fault could not be injected (nothing counted). */
const INJECT: Record<FaultKind, (t: FaultTargets) => Promise<boolean>> = {
  async kills(t) {
    t.faultTimes.push(Date.now());
    await t.server.kill('SIGKILL');
    t.faults.kills++;
    t.log(`SIGKILL #${t.faults.kills}`);
    await sleep(between(t, 0, 1500));
    await t.server.start();
    return true;
  },
  async worker_kills(t) {
    t.faultTimes.push(Date.now());
    const pid = t.server.killWorker((n) => Math.floor(t.random() * n));
    if (pid === undefined) {
      t.log('no cluster worker to kill');
      return false;
    }
    t.faults.worker_kills++;
    t.log(`SIGKILL of cluster worker ${pid} (#${t.faults.worker_kills})`);
    return true;
  },
  async pg_kills(t) {
    t.faultTimes.push(Date.now());
    const pid = t.pgc.sigkillPostmaster();
    t.faults.pg_kills++;
    const down = between(t, 300, 2000);
    t.log(`PostgreSQL postmaster ${pid} SIGKILLed (#${t.faults.pg_kills}); restart in ${Math.round(down)} ms`);
    await sleep(down);
    await t.pgc.restartAfterCrash();
    t.faultTimes.push(Date.now());
    if (!t.server.alive()) await t.server.start();
    return true;
  },
  async redis_hangs(t) {
    t.redis.hang();
    t.faults.redis_hangs++;
    const hung = between(t, 2000, 6000);
    t.log(`Redis frozen (SIGSTOP) for ${Math.round(hung)} ms`);
    await sleep(hung);
    t.redis.resume();
    return true;
  },
  async clock_steps(t) {
    // ±2 h from the true time, or back to it: forward and backward steps both happen.
    const to = t.clock.offsetMs !== 0 ? 0 : t.random() < 0.5 ? 7_200_000 : -7_200_000;
    const from = t.clock.offsetMs;
    t.clock.set(to);
    t.faults.clock_steps++;
    t.log(`wall clock of the servers stepped ${to > from ? 'forward' : 'backward'} by ${Math.abs(to - from) / 3_600_000} h (offset now ${to / 3_600_000} h)`);
    return true;
  },
  async pg_restarts(t) {
    const mode = t.random() < 0.5 ? 'fast' : 'immediate';
    t.faultTimes.push(Date.now());
    await t.pgc.stop(mode);
    t.faults.pg_restarts++;
    const down = between(t, 300, 3000);
    t.log(`PostgreSQL stopped (${mode}) for ${Math.round(down)} ms`);
    await sleep(down);
    await t.pgc.start();
    t.faultTimes.push(Date.now());
    if (!t.server.alive()) await t.server.start();
    return true;
  },
  async redis_stops(t) {
    await t.redis.stop();
    t.faults.redis_stops++;
    const down = between(t, 1000, 5000);
    t.log(`Redis stopped for ${Math.round(down)} ms`);
    await sleep(down);
    await t.redis.start();
    return true;
  },
  async stalls(t) {
    const drop = t.random() < 0.3;
    const delay = Math.round(between(t, 2500, 8000));
    const a = await t.operator.call('sandbox', 'PUT', '/rail/stall', { delay_ms: delay, drop }, 5000);
    if (a.status !== 200) {
      t.log(`rail stall refused: ${a.status} ${a.text || a.error}`);
      return false;
    }
    t.faults.stalls++;
    const lasts = between(t, 2000, 8000);
    t.log(`rail stalled (delay ${delay} ms, drop ${drop}) for ${Math.round(lasts)} ms`);
    await sleep(lasts);
    await ensureStallCleared(t);
    return true;
  },
};
