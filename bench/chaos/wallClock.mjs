/**
 * Wall-clock steps for the fault-injection suite: loaded with `node --import` into a pixgate process
 * (and, through execArgv, into its cluster workers), it shifts Date.now() and `new Date()` by an
 * offset in milliseconds read from the file named by CHAOS_CLOCK_FILE, as an NTP step would. The
 * harness rewrites the file; every process re-reads it every 100 ms (one stat, the file read only
 * when it changed) and at once on SIGUSR2. Monotonic clocks (performance.now, process.hrtime,
 * timers) are untouched, as they are by a real step. Without CHAOS_CLOCK_FILE nothing changes.
 */
import { readFileSync, statSync } from 'node:fs';

const file = process.env.CHAOS_CLOCK_FILE;
if (file) {
  const RealDate = Date;
  const realNow = RealDate.now.bind(RealDate);
  let offset = 0;
  let seen = -1;
  const reread = (force) => {
    try {
      const st = statSync(file);
      if (!force && st.mtimeMs === seen) return;
      seen = st.mtimeMs;
      const n = Number(readFileSync(file, 'utf8').trim());
      if (Number.isFinite(n)) offset = n;
    } catch {
      // no file yet: no offset
    }
  };
  reread(true);
  setInterval(() => reread(false), 100).unref();
  process.on('SIGUSR2', () => reread(true));
  const now = () => realNow() + offset;
  globalThis.Date = new Proxy(RealDate, {
    construct(target, args, newTarget) {
      return Reflect.construct(target, args.length === 0 ? [now()] : args, newTarget === globalThis.Date ? target : newTarget);
    },
    apply() {
      return new RealDate(now()).toString();
    },
    get(target, prop, receiver) {
      if (prop === 'now') return now;
      return Reflect.get(target, prop, receiver);
    },
  });
}
