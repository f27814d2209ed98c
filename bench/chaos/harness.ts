/**
 * The fault-injection suite (`npm run chaos`; a short run inside `npm test`): pixgate on its own
 * PostgreSQL and Redis, driven by concurrent clients while the server is SIGKILLed and restarted,
 * the rail stalled, PostgreSQL restarted and Redis stopped; then a drain and an audit.
 * See docs/chaos.md. Set-up is in setup.ts, the faults in faults.ts, the audit in audit.ts, the
 * report in report.ts.
 */
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { packageRoot } from '../../src/lib/paths.js';
import { audit, type Anomaly } from './audit.js';
import { Operator } from './client.js';
import { ensureStallCleared, injectFaults, noFaults, ServerClock, type FaultCounts, type FaultTargets } from './faults.js';
import { PixgateServer, PostgresCluster, RedisServer, freePort } from './infra.js';
import { waitDrained } from './drain.js';
import { WebhookReceiver } from './receiver.js';
import { answerTimes, countByCheck, runAnomalies, tallyOperations, tallyRefusals, type ChaosReport } from './report.js';
import { addMerchant, depositsAreIdempotent, emptyCatalog, pressureGroups, pressureOf, receiverKeys, serverEnv, stallSwitchPresent, type Catalog, type SetupContext } from './setup.js';
import { Workload, prng } from './workload.js';

export { formatReport, readLogTail, workerDeaths, type ChaosReport } from './report.js';
export { POOR } from './setup.js';

export interface ChaosOptions {
  seed: number;
  /** Minimum run time of the fault phase. */
  durationMs: number;
  /** Minimum number of SIGKILL/restart cycles of the server. */
  kills: number;
  /** Minimum number of each other fault (PostgreSQL restart, Redis stop, rail stall when available). */
  pgRestarts: number;
  redisStops: number;
  stalls: number;
  /** Minimum number of each fault of issue 24: SIGKILL of the postmaster, Redis frozen (SIGSTOP), wall-clock steps of the servers, SIGKILL of one cluster worker. */
  pgKills: number;
  redisHangs: number;
  clockSteps: number;
  workerKills: number;
  workers: number;
  merchants: number;
  /** Of which under funds pressure (small balance, low limits, bursts of concurrent cash-outs). */
  poorMerchants: number;
  /** WEB_CONCURRENCY of the server (its cluster workers share the database and Redis). */
  webConcurrency: number;
  clientTimeoutMs: number;
  /** Longest wait for the system to drain after the faults. */
  drainMs: number;
  /** Keep the temporary folder (server log, PostgreSQL log) after the run. */
  keep: boolean;
  log: (line: string) => void;
}

export const DEFAULTS: ChaosOptions = {
  seed: 1,
  durationMs: 240_000,
  kills: 20,
  pgRestarts: 3,
  redisStops: 3,
  stalls: 3,
  pgKills: 3,
  redisHangs: 3,
  clockSteps: 3,
  workerKills: 3,
  workers: 8,
  merchants: 4,
  poorMerchants: 2,
  webConcurrency: 2,
  clientTimeoutMs: 4000,
  drainMs: 180_000,
  keep: false,
  log: (line) => console.log(line),
};

export const WALL_CLOCK = join(packageRoot, 'bench', 'chaos', 'wallClock.mjs');

/** How often a new limited merchant joins during the faults. */
const FRESH_LIMITED_EVERY_MS = 20_000;

export async function runChaos(partial: Partial<ChaosOptions> = {}): Promise<ChaosReport> {
  const o: ChaosOptions = { ...DEFAULTS, ...partial };
  const log = (line: string) => o.log(`[chaos +${((Date.now() - t0) / 1000).toFixed(1)}s] ${line}`);
  const t0 = Date.now();
  const dir = mkdtempSync(join(tmpdir(), 'pixgate-chaos-'));
  const pgc = new PostgresCluster();
  const redis = new RedisServer();
  const receiver = new WebhookReceiver(0.03, prng(o.seed + 17));
  const clockFile = join(dir, 'clock-offset');
  const clock = new ServerClock(clockFile);
  const anomalies: Anomaly[] = [];
  let server: PixgateServer | undefined;
  let workload: Workload | undefined;
  try {
    await pgc.init();
    await redis.start();
    await receiver.start();
    log(`seed ${o.seed}; PostgreSQL on ${pgc.port} (${pgc.dir}), Redis on ${redis.port}, receiver on ${receiver.port}; logs in ${dir}`);
    const adminToken = `chaos-${randomBytes(12).toString('hex')}`;
    server = new PixgateServer(serverEnv(o, { db: pgc.url, redis: redis.url }, receiver.port, adminToken, clockFile), await freePort(), join(dir, 'pixgate.log'), ['--import', WALL_CLOCK]);
    await server.start();
    const operator = new Operator(server.url, adminToken);

    // Set-up through the operator and sandbox APIs (before any fault).
    const keys = await receiverKeys(operator);
    const setup: SetupContext = { operator, server, receiver, catalog: emptyCatalog() };
    const { catalog } = setup;
    // The last `poorMerchants` merchants are under funds pressure, alternately limited (low limits) and broke (small balance).
    for (let i = 0; i < o.merchants; i++) await addMerchant(setup, i, pressureOf(i, o));
    const idempotentDeposits = await depositsAreIdempotent(operator, catalog, log);
    const stallSupported = await stallSwitchPresent(operator, log);
    const wl = (workload = new Workload(catalog.merchants, operator, { seed: o.seed, workers: o.workers, clientTimeoutMs: o.clientTimeoutMs, keys, evpKeys: catalog.evpKeys, idempotentDeposits, ...pressureGroups(o) }));
    wl.start();

    // Faults, one at a time, at seeded random moments, until every minimum is met and the time is up.
    const t: FaultTargets = { server, pgc, redis, operator, clock, random: prng(o.seed), log, stallSupported, faults: noFaults(), faultTimes: [], anomalies };
    const fresh = { next: Date.now() + FRESH_LIMITED_EVERY_MS / 2, added: 0 };
    const faultWindows = await injectFaults(t, wantedFaults(o, stallSupported), o.durationMs, () => freshLimitedMerchant(setup, wl, t, fresh));
    log(`faults over: ${JSON.stringify(t.faults)}; draining`);

    const result = await drainAndAudit(o, t, wl, catalog, receiver, log);
    anomalies.push(...result.anomalies, ...runAnomalies(wl, server, t0));

    const figures: Record<string, number> = {
      operations: wl.ops.length,
      acknowledged: wl.ops.filter((x) => x.acked).length,
      requests_sent: wl.ops.reduce((a, x) => a + x.sends, 0),
      ...t.faults,
      server_starts: server.starts,
      ...wl.figures,
      replays: wl.ops.filter((x) => x.replay).length,
      burst_cash_outs: wl.ops.filter((x) => x.burst).length,
      limited_merchants_added: fresh.added,
      ...answerTimes(wl.ops, faultWindows, o.clientTimeoutMs),
      refused: wl.ops.filter((x) => x.refused).length,
      ...result.figures,
      anomalies: anomalies.length,
    };
    return { seed: o.seed, figures, operations: tallyOperations(wl.ops), anomalies, byCheck: countByCheck(anomalies), refusals: tallyRefusals(wl.ops), faults: { ...t.faults }, stallSupported, dir };
  } finally {
    await workload?.stop().catch(() => {});
    if (server) await server.kill('SIGKILL').catch(() => {});
    await receiver.stop().catch(() => {});
    redis.resume();
    await redis.stop().catch(() => {});
    await pgc.destroy().catch(() => {});
    if (!o.keep && anomalies.length === 0) rmSync(dir, { recursive: true, force: true });
  }
}

/** The minimum of each fault: 0 turns one off (worker kills without a cluster, stalls without the switch). */
function wantedFaults(o: ChaosOptions, stallSupported: boolean): FaultCounts {
  return {
    kills: o.kills,
    worker_kills: o.webConcurrency > 1 ? o.workerKills : 0,
    pg_restarts: o.pgRestarts,
    pg_kills: o.pgKills,
    redis_stops: o.redisStops,
    redis_hangs: o.redisHangs,
    stalls: stallSupported ? o.stalls : 0,
    clock_steps: o.clockSteps,
  };
}

/**
 * Now and then (after a fault, once a kill happened) a new limited merchant joins, opening with a
 * burst: the first cash-outs of a limit window from both processes, while its usage row does not exist yet.
 */
async function freshLimitedMerchant(setup: SetupContext, wl: Workload, t: FaultTargets, fresh: { next: number; added: number }): Promise<void> {
  if (Date.now() < fresh.next || t.faults.kills + t.faults.worker_kills === 0) return;
  fresh.next = Date.now() + FRESH_LIMITED_EVERY_MS;
  const i = setup.catalog.merchants.length;
  try {
    await addMerchant(setup, i, 'limited');
    wl.addLimited(i);
    fresh.added++;
    t.log(`limited merchant #${i} joined (account ${setup.catalog.merchants[i]!.accountId}): opening burst`);
  } catch (err) {
    // Half made: whatever it did is audited like the rest, but the workload never uses it.
    t.log(`adding a limited merchant failed: ${(err as Error).message}`);
  }
}

/** Drain: everything up, clients finish (retrying) their last operation, the system settles; then the replays, and the audit. */
async function drainAndAudit(o: ChaosOptions, t: FaultTargets, wl: Workload, catalog: Catalog, receiver: WebhookReceiver, log: (line: string) => void) {
  if (t.clock.offsetMs !== 0) {
    log(`wall clock of the servers stepped back to the true time (offset was ${t.clock.offsetMs / 3_600_000} h)`);
    t.clock.set(0);
  }
  if (!t.server.alive()) await t.server.start();
  await ensureStallCleared(t);
  wl.retryDeadline = Date.now() + o.drainMs / 2;
  await wl.stop();
  const db = new pg.Client({ connectionString: t.pgc.url });
  await db.connect();
  await waitDrained(db, o.drainMs, 'after the faults', t.anomalies);
  log('drained; resending every acknowledged keyed operation');
  await wl.replayAcknowledged();
  await waitDrained(db, o.drainMs, 'after the replays', t.anomalies);
  await t.server.kill('SIGTERM');
  log('auditing');
  const result = await audit({ query: async (text, params) => (await db.query(text, params)).rows, ops: wl.ops, receipts: receiver.receipts, faultTimes: t.faultTimes, webhookIds: catalog.webhookIds, subscribed: catalog.subscribed, accounts: catalog.accounts });
  await db.end();
  return result;
}
