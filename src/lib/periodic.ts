import type { Logger } from 'pino';
import type { BackgroundWorker } from './worker.js';

/**
 * A background loop that runs `tick` every `intervalMs` (the next run is scheduled after the
 * previous one finishes; a failing tick is logged and the loop goes on). `stop` waits for the
 * tick in hand.
 */
export function periodicWorker(name: string, intervalMs: number, log: Logger, tick: () => Promise<unknown>): BackgroundWorker {
  let timer: NodeJS.Timeout | undefined;
  let running: Promise<void> | undefined;
  let stopped = true;
  const schedule = () => {
    if (!stopped) timer = setTimeout(run, intervalMs);
  };
  const run = () => {
    running = tick()
      .then(
        () => undefined,
        (err) => log.error({ err, worker: name }, 'background worker tick failed'),
      )
      .finally(() => {
        running = undefined;
        schedule();
      });
  };
  return {
    name,
    start() {
      if (!stopped) return;
      stopped = false;
      schedule();
    },
    async stop() {
      stopped = true;
      if (timer) clearTimeout(timer);
      await running;
    },
  };
}
