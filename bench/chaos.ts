/**
 * npm run chaos — the fault-injection suite (docs/chaos.md). Starts its own PostgreSQL cluster and
 * Redis on free ports, runs the built server (npm run build first; `npm run chaos` does), drives it
 * with concurrent clients while injecting faults, drains, audits, prints the figures and exits 1 on
 * any anomaly.
 *
 *   --seed N          seed of every random choice (CHAOS_SEED; default: random, printed)
 *   --seconds N       minimum length of the fault phase (CHAOS_SECONDS; default 240)
 *   --kills N         minimum SIGKILL/restart cycles (CHAOS_KILLS; default 20)
 *   --pg-restarts N   minimum PostgreSQL restarts (default 3)   --redis-stops N (default 3)
 *   --stalls N        minimum rail stalls when the switch exists (default 3)
 *   --pg-kills N      minimum SIGKILLs of the postmaster (default 3)
 *   --redis-hangs N   minimum Redis freezes, SIGSTOP (default 3)
 *   --clock-steps N   minimum ±2 h wall-clock steps of the servers (default 3)
 *   --worker-kills N  minimum SIGKILLs of one cluster worker (default 3)
 *   --workers N       concurrent clients (default 8)            --merchants N (default 4)
 *   --poor N          merchants under funds pressure, of --merchants (default 2)
 *   --web-concurrency N  WEB_CONCURRENCY of the server (default 2)
 *   --keep            keep the temporary folder (logs) even on a clean run
 */
import { randomInt } from 'node:crypto';
import { parseArgs } from 'node:util';
import { DEFAULTS, formatReport, runChaos } from './chaos/harness.js';
import { missingPrerequisite } from './chaos/infra.js';

const { values } = parseArgs({
  options: {
    seed: { type: 'string' },
    seconds: { type: 'string' },
    kills: { type: 'string' },
    'pg-restarts': { type: 'string' },
    'redis-stops': { type: 'string' },
    stalls: { type: 'string' },
    'pg-kills': { type: 'string' },
    'redis-hangs': { type: 'string' },
    'clock-steps': { type: 'string' },
    'worker-kills': { type: 'string' },
    poor: { type: 'string' },
    'web-concurrency': { type: 'string' },
    workers: { type: 'string' },
    merchants: { type: 'string' },
    keep: { type: 'boolean', default: false },
  },
});
const num = (v: string | undefined, env: string | undefined, fallback: number) => (v ?? env ? Number(v ?? env) : fallback);
const missing = missingPrerequisite();
if (missing) {
  console.error(`chaos: cannot run: ${missing}`);
  process.exit(2);
}
const report = await runChaos({
  seed: num(values.seed, process.env.CHAOS_SEED, randomInt(1, 2 ** 31)),
  durationMs: num(values.seconds, process.env.CHAOS_SECONDS, DEFAULTS.durationMs / 1000) * 1000,
  kills: num(values.kills, process.env.CHAOS_KILLS, DEFAULTS.kills),
  pgRestarts: num(values['pg-restarts'], undefined, DEFAULTS.pgRestarts),
  redisStops: num(values['redis-stops'], undefined, DEFAULTS.redisStops),
  stalls: num(values.stalls, undefined, DEFAULTS.stalls),
  pgKills: num(values['pg-kills'], undefined, DEFAULTS.pgKills),
  redisHangs: num(values['redis-hangs'], undefined, DEFAULTS.redisHangs),
  clockSteps: num(values['clock-steps'], undefined, DEFAULTS.clockSteps),
  workerKills: num(values['worker-kills'], undefined, DEFAULTS.workerKills),
  poorMerchants: num(values.poor, undefined, DEFAULTS.poorMerchants),
  webConcurrency: num(values['web-concurrency'], undefined, DEFAULTS.webConcurrency),
  workers: num(values.workers, undefined, DEFAULTS.workers),
  merchants: num(values.merchants, undefined, DEFAULTS.merchants),
  keep: values.keep,
});
console.log(`\n${formatReport(report)}`);
process.exit(report.anomalies.length === 0 ? 0 : 1);
