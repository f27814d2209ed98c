/**
 * wallClockShift.mjs — a preload (`node --import`) that shifts the wall clock of one Node process,
 * for tests of wall-clock steps (NTP corrections, a VM resumed, an operator's `date -s`). The
 * machine's clock is never touched.
 *
 * Interface (environment of the process that preloads it):
 *   PIXGATE_WALL_CLOCK_SHIFT_FILE=<path>  a file holding the shift in milliseconds, one integer
 *                                         (negative: back in time). Re-read every 50 ms, so a test
 *                                         steps the clock of a running process by rewriting the file.
 *                                         A missing or unreadable file, or text that is not a number,
 *                                         leaves the shift as it was.
 *   PIXGATE_WALL_CLOCK_SHIFT_MS=<n>       the shift at start (default 0), before the file is read.
 *
 * What shifts: `Date.now()`, `new Date()` without arguments and `Date()` — whatever reads the wall
 * clock through `Date` (the embedded PGlite's `now()` included: its WebAssembly reads `Date.now()`).
 * What does not: `performance.now()`, `process.hrtime`, timers (they run on the monotonic clock),
 * `new Date(x)` with an argument, and every other process (a PostgreSQL server keeps its own clock).
 * Dates stay ordinary: `x instanceof Date` holds for every date, made before or after.
 *
 * Use: `node --import ./test/helpers/wallClockShift.mjs dist/src/main.js`, or through the
 * environment: `NODE_OPTIONS=--import=/absolute/path/test/helpers/wallClockShift.mjs`.
 */
import { readFileSync } from 'node:fs';

const RealDate = globalThis.Date;
const realNow = RealDate.now.bind(RealDate);
let shiftMs = Number(process.env.PIXGATE_WALL_CLOCK_SHIFT_MS ?? 0) || 0;

const file = process.env.PIXGATE_WALL_CLOCK_SHIFT_FILE;
if (file) {
  const read = () => {
    try {
      const value = Number(readFileSync(file, 'utf8').trim());
      if (Number.isFinite(value)) shiftMs = value;
    } catch {
      // not there (yet): keep the shift as it is
    }
  };
  read();
  setInterval(read, 50).unref();
}

function ShiftedDate(...args) {
  if (!new.target) return new RealDate(realNow() + shiftMs).toString(); // Date() called as a function
  return args.length === 0 ? new RealDate(realNow() + shiftMs) : new RealDate(...args);
}
ShiftedDate.prototype = RealDate.prototype; // so `instanceof Date` holds for every date
ShiftedDate.now = () => realNow() + shiftMs;
ShiftedDate.parse = RealDate.parse;
ShiftedDate.UTC = RealDate.UTC;
Object.defineProperty(ShiftedDate, 'name', { value: 'Date' });
globalThis.Date = ShiftedDate;
