/**
 * npm run ha — the high-availability lab (docs/deploy.md): installs the Debian packages it needs
 * when missing, starts etcd, three PostgreSQL nodes under Patroni (synchronous_mode_strict),
 * HAProxy, pgbouncer, Redis with Sentinel and pixgate nodes on free ports in a temporary folder,
 * drives them with the chaos suite's clients while failing over, audits, tears everything down and
 * exits 1 on any anomaly. Its last line:
 *   ha: failovers N, switchovers S, acknowledged A, lost 0, duplicated 0, rto_p50 Xs, rto_p99 Ys
 *
 *   --seed N            seed of every random choice (default: random, printed)
 *   --failovers N       SIGKILLs of the primary's postmaster (default 5)   --long: 20
 *   --switchovers N     planned switchovers (default 1)
 *   --pooler / --no-pooler      pixgate through pgbouncer (default: on when pixgate supports DATABASE_POOLER)
 *   --sentinel / --no-sentinel  pixgate through Sentinel (default: on when pixgate supports REDIS_SENTINELS)
 *   --workers N         concurrent clients (default 6)     --app-nodes N (default 2)
 *   --bench             no faults: cash-out throughput against pgbench on the same primary
 *   --keep              keep the temporary folder (logs)
 */
import { randomInt } from 'node:crypto';
import { parseArgs } from 'node:util';
import { ensurePrerequisites, pixgateSupports } from './ha/lab.js';
import { runBench } from './ha/bench.js';
import { HA_DEFAULTS, formatHa, runHa } from './ha/run.js';

const { values } = parseArgs({
  options: {
    seed: { type: 'string' },
    failovers: { type: 'string' },
    switchovers: { type: 'string' },
    long: { type: 'boolean', default: false },
    pooler: { type: 'boolean' },
    'no-pooler': { type: 'boolean' },
    sentinel: { type: 'boolean' },
    'no-sentinel': { type: 'boolean' },
    workers: { type: 'string' },
    'app-nodes': { type: 'string' },
    bench: { type: 'boolean', default: false },
    keep: { type: 'boolean', default: false },
  },
});
const missing = ensurePrerequisites();
if (missing) {
  console.error(`ha: cannot run: ${missing}`);
  process.exit(2);
}
const pooler = values['no-pooler'] ? false : (values.pooler ?? pixgateSupports('DATABASE_POOLER'));
const sentinel = values['no-sentinel'] ? false : (values.sentinel ?? pixgateSupports('REDIS_SENTINELS'));
const common = {
  seed: Number(values.seed ?? randomInt(1, 2 ** 31)),
  pooler,
  sentinel,
  workers: Number(values.workers ?? HA_DEFAULTS.workers),
  appNodes: Number(values['app-nodes'] ?? HA_DEFAULTS.appNodes),
  keep: values.keep,
};
if (values.bench) {
  const line = await runBench(common);
  console.log(line);
  process.exit(0);
}
const report = await runHa({
  ...common,
  failovers: Number(values.failovers ?? (values.long ? 20 : HA_DEFAULTS.failovers)),
  switchovers: Number(values.switchovers ?? HA_DEFAULTS.switchovers),
});
console.log(`\n${formatHa(report)}`);
process.exit(report.anomalies.length === 0 && report.lost === 0 && report.duplicated === 0 ? 0 : 1);
