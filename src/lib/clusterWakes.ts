import cluster from 'node:cluster';
import type { BackgroundWorker } from './worker.js';
import type { Database } from '../db/db.js';
import { monotonicNow } from './clock.js';

/**
 * Wake-ups between the processes of a cluster (WEB_CONCURRENCY > 1). One worker runs the
 * background loops that batch across the whole cluster — the rail simulator's engine (settlements
 * and their notifications), the webhook dispatcher, the PIX recovery — so that their
 * batches hold the work of every worker instead of half of it each; the other workers serve HTTP
 * and tell it, through the primary, when work they queued falls due (docs/decisions.md, "One
 * background worker per cluster"). The safety nets of those loops stay: a wake-up lost with a dying
 * process only waits for the next poll.
 */

/** One wake-up: a local wake-up channel (`wakeLocal`), or RAIL_ENGINE with the time its work falls due. */
export interface Wake {
  name: string;
  /** For RAIL_ENGINE: when the work falls due (real-time ms). */
  at?: number;
}

/** What a worker sends the primary, and the primary the background worker: the wake-ups of one flush. */
export interface WakeMessage {
  pixgate: 'wake';
  wakes: Wake[];
}

/** The rail simulator's engine, woken for a time (`SimulatedRail.wake`). */
export const RAIL_ENGINE = 'rail-engine';

/** Set by the primary on the worker it forks to run the background loops. */
export const BACKGROUND_ENV = 'PIXGATE_BACKGROUND';

export function isWakeMessage(m: unknown): m is WakeMessage {
  return (
    typeof m === 'object' &&
    m !== null &&
    (m as { pixgate?: unknown }).pixgate === 'wake' &&
    Array.isArray((m as { wakes?: unknown }).wakes) &&
    (m as { wakes: unknown[] }).wakes.every((w) => typeof w === 'object' && w !== null && typeof (w as { name?: unknown }).name === 'string')
  );
}

/** Whether this process runs the background loops: a single process, or the cluster's background worker. */
export function runsBackgroundLoops(env: NodeJS.ProcessEnv = process.env): boolean {
  return !cluster.isWorker || env[BACKGROUND_ENV] === '1';
}

/** How long wake-ups wait for others to leave with them (ms): the dispatcher spaces its runs 10 ms apart anyway. */
export const WAKE_FLUSH_MS = 10;

/**
 * A sender of wake-ups to the background worker: every wake-up of a `WAKE_FLUSH_MS` window leaves
 * in one message — a channel once however often it was woken, the engine once per time it is due
 * (times come in 20 ms steps, each sent once, and mostly lie a settlement delay ahead: 1.6 s by
 * default, against which 10 ms is nothing). A message costs a write and a wake-up of two processes
 * (this one to the primary, the primary to the background worker); sent one per channel and per
 * time, the primary relayed twice as many (docs/decisions.md, "One background worker per cluster").
 */
export function wakeSender(
  send: (m: WakeMessage) => void = (m) => void process.send?.(m, undefined, {}, () => {}),
  flushMs = WAKE_FLUSH_MS,
): { wake(name: string): void; wakeAt(name: string, at: number): void } {
  let pending: Wake[] = [];
  const named = new Set<string>();
  const lastAt = new Map<string, number>();
  const add = (w: Wake) => {
    if (pending.length === 0) {
      setTimeout(() => {
        const wakes = pending;
        pending = [];
        named.clear();
        send({ pixgate: 'wake', wakes });
      }, flushMs).unref();
    }
    pending.push(w);
  };
  return {
    wake(name) {
      if (named.has(name)) return;
      named.add(name);
      add({ name });
    },
    wakeAt(name, at) {
      if (lastAt.get(name) === at) return;
      lastAt.set(name, at);
      add({ name, at });
    },
  };
}

/** What the forwarder and the receiver need of the rail simulator. */
export interface EngineWakes {
  forwardWakes(forward: (at: number) => void): void;
  wake(at: number): void;
}

/**
 * In a worker that does not run the background loops: the engine's wake-ups and those of the local
 * channels `channels` (written by this process's commits: `wakeLocal`) go to the background worker.
 */
export function wakeForwarder(db: Pick<Database, 'listen'>, engine: EngineWakes, channels: readonly string[], send?: (m: WakeMessage) => void): BackgroundWorker {
  const sender = wakeSender(send);
  const offs: Array<() => Promise<void>> = [];
  let started = false;
  return {
    name: 'cluster-wake-forwarder',
    start() {
      if (started) return;
      started = true;
      engine.forwardWakes((at) => sender.wakeAt(RAIL_ENGINE, at));
      for (const name of channels) void db.listen(name, () => sender.wake(name)).then((off) => offs.push(off), () => {});
    },
    async stop() {
      started = false;
      await Promise.allSettled(offs.splice(0).map((off) => off()));
    },
  };
}

/** In the background worker of a cluster: the wake-ups the other workers send (`wakeForwarder`). */
export function wakeReceiver(wakeLocal: (name: string) => void, engine: EngineWakes): BackgroundWorker {
  const onMessage = (m: unknown) => {
    if (!isWakeMessage(m)) return;
    for (const w of m.wakes) {
      if (w.name === RAIL_ENGINE) engine.wake(typeof w.at === 'number' ? w.at : monotonicNow());
      else wakeLocal(w.name);
    }
  };
  return {
    name: 'cluster-wake-receiver',
    start: () => void process.on('message', onMessage),
    stop: async () => void process.off('message', onMessage),
  };
}
