import type { Logger } from 'pino';
import type { BackgroundWorker } from './worker.js';
import type { Database } from '../db/db.js';

/** A sleep that `wake()` cuts short (a wake with nobody sleeping is kept for the next sleep). */
export class Waker {
  private resolveSleep: (() => void) | undefined;
  private pending = false;

  wake() {
    this.pending = true;
    this.resolveSleep?.();
  }

  sleep(ms: number): Promise<void> {
    if (this.pending) {
      this.pending = false;
      return Promise.resolve();
    }
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(timer);
        this.resolveSleep = undefined;
        this.pending = false;
        resolve();
      };
      const timer = setTimeout(done, Math.max(0, ms));
      this.resolveSleep = done;
    });
  }
}

/**
 * Subscribes `wake` to the notification channels `names` of `db` (a `null` — notifications may
 * have been missed — wakes too). Resolves with one unsubscribe for all; a channel that cannot be
 * listened to is left to the caller's safety-net poll.
 */
export async function wakeOn(db: Pick<Database, 'listen'>, names: readonly string[], wake: () => void, log: Logger): Promise<() => Promise<void>> {
  const offs: Array<() => Promise<void>> = [];
  for (const name of names) {
    try {
      offs.push(await db.listen(name, () => wake()));
    } catch (err) {
      log.warn({ err, channel: name }, 'cannot listen for wake-ups; the safety-net poll finds the work');
    }
  }
  return async () => {
    await Promise.allSettled(offs.map((off) => off()));
  };
}

export interface WakeableWorkerOptions {
  name: string;
  log: Logger;
  /** The longest sleep between two ticks: the safety net for wake-ups that never came. */
  safetyNetMs: number;
  /** Channels whose notifications (and `null`) wake the worker at once. */
  wakeOn?: { db: Pick<Database, 'listen'>; channels: readonly string[] };
  /** Wait after a failed tick (default: min(safetyNetMs, 1 s)). */
  retryMs?: number;
}

/**
 * A background loop that runs `tick` at start, whenever it is woken (a notification on one of its
 * channels, `wake()`), and at the latest `safetyNetMs` after the previous tick. `tick` may return
 * how long it wants to sleep (e.g. until the earliest deadline it read; capped by the safety net);
 * undefined means the safety net. A failing tick is logged and tried again after `retryMs`.
 */
export function wakeableWorker(options: WakeableWorkerOptions, tick: () => Promise<number | undefined>): BackgroundWorker & { wake(): void } {
  const waker = new Waker();
  let stopped = true;
  let loop: Promise<void> | undefined;
  let unsubscribe: (() => Promise<void>) | undefined;
  const run = async () => {
    if (options.wakeOn) unsubscribe = await wakeOn(options.wakeOn.db, options.wakeOn.channels, () => waker.wake(), options.log);
    while (!stopped) {
      let sleepMs: number;
      try {
        const wanted = await tick();
        sleepMs = Math.min(wanted ?? options.safetyNetMs, options.safetyNetMs);
      } catch (err) {
        options.log.error({ err, worker: options.name }, 'background worker tick failed');
        sleepMs = options.retryMs ?? Math.min(options.safetyNetMs, 1_000);
      }
      if (!stopped) await waker.sleep(sleepMs);
    }
  };
  return {
    name: options.name,
    wake: () => waker.wake(),
    start() {
      if (!stopped) return;
      stopped = false;
      loop = run();
    },
    async stop() {
      stopped = true;
      waker.wake();
      await loop;
      await unsubscribe?.();
      unsubscribe = undefined;
    },
  };
}
