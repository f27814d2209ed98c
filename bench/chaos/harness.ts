/**
 * The fault-injection suite (`npm run chaos`; a short run inside `npm test`): pixgate on its own
 * PostgreSQL and Redis, driven by concurrent clients while the server is SIGKILLed and restarted,
 * the rail stalled, PostgreSQL restarted and Redis stopped; then a drain and an audit.
 * See docs/chaos.md.
 */
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { validCnpj, validCpf } from '../../test/helpers/fixtures.js';
import { packageRoot } from '../../src/lib/paths.js';
import { audit, type AccountView, type Anomaly } from './audit.js';
import { Merchant, Operator, clientClock } from './client.js';
import { PixgateServer, PostgresCluster, RedisServer, freePort, sleep } from './infra.js';
import { waitDrained } from './drain.js';
import { WebhookReceiver } from './receiver.js';
import { Workload, prng, type Op } from './workload.js';

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

export async function runChaos(partial: Partial<ChaosOptions> = {}): Promise<ChaosReport> {
  const o: ChaosOptions = { ...DEFAULTS, ...partial };
  const log = (line: string) => o.log(`[chaos +${((Date.now() - t0) / 1000).toFixed(1)}s] ${line}`);
  const t0 = Date.now();
  const dir = mkdtempSync(join(tmpdir(), 'pixgate-chaos-'));
  const random = prng(o.seed);
  const pgc = new PostgresCluster();
  const redis = new RedisServer();
  const receiver = new WebhookReceiver(0.03, prng(o.seed + 17));
  let server: PixgateServer | undefined;
  const faults = { kills: 0, worker_kills: 0, pg_restarts: 0, pg_kills: 0, redis_stops: 0, redis_hangs: 0, stalls: 0, clock_steps: 0 };
  const clockFile = join(dir, 'clock-offset');
  writeFileSync(clockFile, '0');
  let clockOffset = 0;
  const setClock = (ms: number) => {
    clockOffset = ms;
    writeFileSync(clockFile, String(ms));
    clientClock.offsetMs = ms;
  };
  const faultTimes: number[] = [];
  const anomalies: Anomaly[] = [];
  let workload: Workload | undefined;
  let stallSupported = false;
  try {
    await pgc.init();
    await redis.start();
    await receiver.start();
    log(`seed ${o.seed}; PostgreSQL on ${pgc.port} (${pgc.dir}), Redis on ${redis.port}, receiver on ${receiver.port}; logs in ${dir}`);
    const adminToken = `chaos-${randomBytes(12).toString('hex')}`;
    server = new PixgateServer(
      {
        DATABASE_URL: pgc.url,
        REDIS_URL: redis.url,
        ADMIN_TOKEN: adminToken,
        APP_ENV: 'local',
        LOG_LEVEL: 'warn',
        WEBHOOK_ALLOWED_HOSTS: `127.0.0.1:${receiver.port}`,
        WEBHOOK_TIMEOUT_MS: '3000',
        WEBHOOK_RETRY_SCHEDULE: '500ms,1s,2s,2s,3s,3s,5s,5s,5s,5s',
        RATE_LIMIT_PER_MINUTE: '100000000',
        SIM_SETTLEMENT_MS: '800',
        SIM_PROTECTION_MS: '1500',
        SIM_SEED: String(o.seed),
        // A rail deadline and a claim lease far shorter than the defaults, so that stalls outlast
        // the deadline and retries take claims over within the run (the paths issue 10 is about).
        RAIL_TIMEOUT_MS: '2000',
        IDEMPOTENCY_LEASE_MS: '8000',
        WEB_CONCURRENCY: String(o.webConcurrency),
        CHAOS_CLOCK_FILE: clockFile,
      },
      await freePort(),
      join(dir, 'pixgate.log'),
      ['--import', WALL_CLOCK],
    );
    await server.start();
    const operator = new Operator(server.url, adminToken);

    // Set-up through the operator and sandbox APIs (before any fault).
    const keys = { settle: 'chaos-settle@example.com', reject: 'chaos-reject@example.com', queued: 'chaos-queued@example.com' };
    for (const [what, key] of Object.entries(keys)) {
      await operator.must('sandbox', 'POST', '/dict/keys', { key, type: 'email', name: `Recebedor ${what}`, document: validCpf(), ispb: '60746948', ...(what === 'reject' ? { behavior: 'reject' } : {}), ...(what === 'queued' ? { fraud_flagged: true } : {}) });
    }
    const catalog = { merchants: [] as Merchant[], accounts: [] as AccountView[], webhookIds: [] as string[], evpKeys: [] as string[], subscribed: [] as string[] };
    /**
     * One merchant with its account, deposit, fees and limits, EVP key, API key and webhook. Each
     * call is retried until answered (the deposit under an Idempotency-Key), so that a merchant added
     * while faults are injected is complete or absent from the workload.
     */
    const addMerchant = async (i: number, pressure: 'limited' | 'broke' | undefined): Promise<void> => {
      const must = async (prefix: 'admin' | 'sandbox', method: string, path: string, body: unknown, headers: Record<string, string> = {}) => {
        for (let tries = 0; ; tries++) {
          const a = await operator.call(prefix, method, path, body, 10_000, headers);
          if (a.status >= 200 && a.status < 300) return a.body;
          if (tries > 60 || (a.status !== 0 && a.status < 500 && a.status !== 429)) throw new Error(`${method} /api/${prefix}${path}: ${a.status} ${a.text || a.error}`);
          await sleep(500);
        }
      };
      const m = await must('admin', 'POST', '/merchants', { name: `Chaos ${i}`, document: validCnpj() });
      const opening = pressure === 'broke' ? POOR.deposit : 1_000_000_000;
      await must('admin', 'POST', `/accounts/${m.account_id}/deposits`, { amount: opening }, { 'idempotency-key': `chaos-opening-${m.account_id}` });
      const fees = { cash_out_fee_cents: i % 2 ? 7 : 0, cash_in_fee_cents: i % 2 ? 0 : 5 };
      const limited = pressure === 'limited';
      await must('admin', 'PATCH', `/accounts/${m.account_id}`, { ...fees, cash_out_daily_limit_cents: limited ? POOR.daily : 10_000_000_000, cash_out_nighttime_limit_cents: limited ? POOR.night : 10_000_000_000 });
      const evpKey = (await must('admin', 'POST', '/pix-keys', { account_id: m.account_id, type: 'evp' })).key as string;
      const k = await must('admin', 'POST', '/api-keys', { merchant_id: m.merchant_id, account_id: m.account_id, permissions: ['pix:write', 'pix:read', 'transfer:write', 'transfer:read', 'payment:write', 'payment:read', 'account:write', 'account:read', 'statement:read'], ip_whitelist: ['127.0.0.1', '::1'] });
      const merchant = new Merchant(server!.url, m.merchant_id, m.account_id, k.client_id, k.client_secret);
      let events: string[] = [];
      for (let tries = 0; events.length === 0; tries++) {
        const a = await merchant.get('/webhooks/events', 10_000);
        if (a.status === 200) events = (a.body as { event: string; firing: string }[]).filter((e) => e.firing === 'active').map((e) => e.event);
        else if (tries > 60) throw new Error(`GET /webhooks/events: ${a.status} ${a.text || a.error}`);
        else await sleep(500);
      }
      catalog.subscribed = events;
      const secret = `whsec_${randomBytes(24).toString('base64')}`;
      receiver.secrets.set(String(m.merchant_id), secret);
      // One registration: a retry after no answer could register a second webhook (two deliveries per event).
      const w = await merchant.post('/webhooks', { url: receiver.url(String(m.merchant_id)), events, secret, allow_insecure: true }, { sign: 'v1', timeoutMs: 10_000 });
      if (w.status !== 201) throw new Error(`webhook registration: ${w.status} ${w.text}`);
      catalog.accounts.push({ accountId: m.account_id, merchant: catalog.merchants.length, opening: opening * 100, cashOutFee: fees.cash_out_fee_cents * 100, cashInFee: fees.cash_in_fee_cents * 100, webhookKey: String(m.merchant_id) });
      catalog.webhookIds.push(w.body.id);
      catalog.evpKeys.push(evpKey);
      catalog.merchants.push(merchant);
    };
    // The last `poorMerchants` merchants are under funds pressure, alternately limited (low limits) and broke (small balance).
    for (let i = 0; i < o.merchants; i++) await addMerchant(i, pressureOf(i, o));
    // Deposits join the mix only where a retried deposit is safe: the same Idempotency-Key twice must name one deposit.
    const probe = () => operator.call('admin', 'POST', `/accounts/${catalog.merchants[0]!.accountId}/deposits`, { amount: 1, description: 'chaos-probe' }, 10_000, { 'idempotency-key': 'chaos-deposit-probe' });
    const [p1, p2] = [await probe(), await probe()];
    const idempotentDeposits = p1.status === 201 && (p2.status === 200 || p2.status === 201) && p1.body?.transaction_id === p2.body?.transaction_id;
    catalog.accounts[0]!.opening += 100 * new Set([p1, p2].filter((p) => p.status >= 200 && p.status < 300).map((p) => p.body?.transaction_id)).size;
    log(idempotentDeposits ? 'operator deposits honour Idempotency-Key: deposits join the mix' : 'operator deposits ignore Idempotency-Key: no deposits during the faults (a retry would credit twice)');
    const stallProbe = await operator.call('sandbox', 'GET', '/rail/stall', undefined, 10_000);
    stallSupported = stallProbe.status === 200;
    log(stallSupported ? `rail stall switch present: ${stallProbe.text}` : `rail stall switch absent (GET /api/sandbox/rail/stall answered ${stallProbe.status}): the stall fault is skipped`);

    const all = Array.from({ length: o.merchants }, (_, i) => i);
    const pressure = { limited: all.filter((i) => pressureOf(i, o) === 'limited'), broke: all.filter((i) => pressureOf(i, o) === 'broke'), limitedNightCents: POOR.night };
    workload = new Workload(catalog.merchants, operator, { seed: o.seed, workers: o.workers, clientTimeoutMs: o.clientTimeoutMs, keys, evpKeys: catalog.evpKeys, idempotentDeposits, ...pressure });
    workload.start();

    // Faults, one at a time, at seeded random moments, until every minimum is met and the time is up.
    const faultStart = Date.now();
    const faultWindows: { kind: string; from: number; to: number }[] = [];
    let nextFresh = faultStart + FRESH_LIMITED_EVERY_MS / 2;
    let freshLimited = 0;
    const want = {
      kills: o.kills,
      worker_kills: o.webConcurrency > 1 ? o.workerKills : 0,
      pg_restarts: o.pgRestarts,
      pg_kills: o.pgKills,
      redis_stops: o.redisStops,
      redis_hangs: o.redisHangs,
      stalls: stallSupported ? o.stalls : 0,
      clock_steps: o.clockSteps,
    };
    const between = (a: number, b: number) => a + random() * (b - a);
    const ensureStallCleared = async () => {
      if (!stallSupported) return;
      for (let i = 0; i < 100; i++) {
        const a = await operator.call('sandbox', 'PUT', '/rail/stall', { delay_ms: 0, drop: false }, 5000);
        if (a.status === 200) return;
        await sleep(500);
      }
      anomalies.push({ check: 'harness', detail: 'could not clear the rail stall' });
    };
    while (Object.entries(want).some(([k, n]) => faults[k as keyof typeof faults] < n) || Date.now() - faultStart < o.durationMs) {
      await sleep(between(1500, 5000));
      const behind = Object.entries(want).filter(([k, n]) => faults[k as keyof typeof faults] < n).map(([k]) => k);
      const roll = random();
      // Kills are the most frequent fault; the others come in when they are behind their minimum or by chance.
      let kind = (Object.entries(FAULT_WEIGHTS).find(([, upTo]) => roll < upTo) ?? ['kills'])[0];
      // A minimum of 0 turns a fault off (and stalls without the switch, worker kills without a cluster).
      if (want[kind as keyof typeof want] === 0) kind = 'kills';
      // Once the time is up, only faults still behind their minimum are drawn, so a short run ends soon.
      const overtime = Date.now() - faultStart >= o.durationMs;
      if (behind.length > 0 && !behind.includes(kind) && (overtime || random() < 0.5)) kind = behind[Math.floor(random() * behind.length)]!;
      const faultFrom = Date.now();
      if (kind === 'kills') {
        faultTimes.push(Date.now());
        await server.kill('SIGKILL');
        faults.kills++;
        log(`SIGKILL #${faults.kills}`);
        await sleep(between(0, 1500));
        await server.start();
      } else if (kind === 'worker_kills') {
        faultTimes.push(Date.now());
        const pid = server.killWorker((n) => Math.floor(random() * n));
        if (pid === undefined) {
          log('no cluster worker to kill');
          continue;
        }
        faults.worker_kills++;
        log(`SIGKILL of cluster worker ${pid} (#${faults.worker_kills})`);
      } else if (kind === 'pg_kills') {
        faultTimes.push(Date.now());
        const pid = pgc.sigkillPostmaster();
        faults.pg_kills++;
        const down = between(300, 2000);
        log(`PostgreSQL postmaster ${pid} SIGKILLed (#${faults.pg_kills}); restart in ${Math.round(down)} ms`);
        await sleep(down);
        await pgc.restartAfterCrash();
        faultTimes.push(Date.now());
        if (!server.alive()) await server.start();
      } else if (kind === 'redis_hangs') {
        redis.hang();
        faults.redis_hangs++;
        const hung = between(2000, 6000);
        log(`Redis frozen (SIGSTOP) for ${Math.round(hung)} ms`);
        await sleep(hung);
        redis.resume();
      } else if (kind === 'clock_steps') {
        // ±2 h from the true time, or back to it: forward and backward steps both happen.
        const to = clockOffset !== 0 ? 0 : random() < 0.5 ? 7_200_000 : -7_200_000;
        const from = clockOffset;
        setClock(to);
        faults.clock_steps++;
        log(`wall clock of the servers stepped ${to > from ? 'forward' : 'backward'} by ${Math.abs(to - from) / 3_600_000} h (offset now ${to / 3_600_000} h)`);
      } else if (kind === 'pg_restarts') {
        const mode = random() < 0.5 ? 'fast' : 'immediate';
        faultTimes.push(Date.now());
        await pgc.stop(mode);
        faults.pg_restarts++;
        const down = between(300, 3000);
        log(`PostgreSQL stopped (${mode}) for ${Math.round(down)} ms`);
        await sleep(down);
        await pgc.start();
        faultTimes.push(Date.now());
        if (!server.alive()) await server.start();
      } else if (kind === 'redis_stops') {
        await redis.stop();
        faults.redis_stops++;
        const down = between(1000, 5000);
        log(`Redis stopped for ${Math.round(down)} ms`);
        await sleep(down);
        await redis.start();
      } else {
        const drop = random() < 0.3;
        const delay = Math.round(between(2500, 8000));
        const a = await operator.call('sandbox', 'PUT', '/rail/stall', { delay_ms: delay, drop }, 5000);
        if (a.status !== 200) {
          log(`rail stall refused: ${a.status} ${a.text || a.error}`);
          continue;
        }
        faults.stalls++;
        const lasts = between(2000, 8000);
        log(`rail stalled (delay ${delay} ms, drop ${drop}) for ${Math.round(lasts)} ms`);
        await sleep(lasts);
        await ensureStallCleared();
      }
      if (!server.alive()) {
        log('server found dead after a fault: restarting');
        await server.start();
      }
      faultWindows.push({ kind, from: faultFrom, to: Date.now() });
      // Now and then a new limited merchant joins, opening with a burst: the first cash-outs of a
      // limit window from both processes, while its usage row does not exist yet.
      if (Date.now() >= nextFresh && faults.kills + faults.worker_kills > 0) {
        nextFresh = Date.now() + FRESH_LIMITED_EVERY_MS;
        const i = catalog.merchants.length;
        try {
          await addMerchant(i, 'limited');
          workload.addLimited(i);
          freshLimited++;
          log(`limited merchant #${i} joined (account ${catalog.merchants[i]!.accountId}): opening burst`);
        } catch (err) {
          // Half made: whatever it did is audited like the rest, but the workload never uses it.
          log(`adding a limited merchant failed: ${(err as Error).message}`);
        }
      }
    }
    log(`faults over: ${JSON.stringify(faults)}; draining`);

    // Drain: everything up, clients finish (retrying) their last operation, the system settles.
    if (clockOffset !== 0) {
      log(`wall clock of the servers stepped back to the true time (offset was ${clockOffset / 3_600_000} h)`);
      setClock(0);
    }
    if (!server.alive()) await server.start();
    await ensureStallCleared();
    workload.retryDeadline = Date.now() + o.drainMs / 2;
    await workload.stop();
    const db = new pg.Client({ connectionString: pgc.url });
    await db.connect();
    await waitDrained(db, o.drainMs, 'after the faults', anomalies);
    log('drained; resending every acknowledged keyed operation');
    await workload.replayAcknowledged();
    await waitDrained(db, o.drainMs, 'after the replays', anomalies);
    await server.kill('SIGTERM');
    log('auditing');

    const result = await audit({ query: async (text, params) => (await db.query(text, params)).rows, ops: workload.ops, receipts: receiver.receipts, faultTimes, webhookIds: catalog.webhookIds, subscribed: catalog.subscribed, accounts: catalog.accounts });
    await db.end();
    anomalies.push(...result.anomalies);
    for (const n of workload.notes) anomalies.push({ check: n.check ?? (n.what === 'client error' ? 'harness' : 'answer'), detail: `${n.op}: ${n.what}: ${n.detail}` });
    for (const e of server.unexpectedExits) anomalies.push({ check: 'server_exit', detail: `pixgate exited on its own (code ${e.code}, signal ${e.signal}) at +${((e.at - t0) / 1000).toFixed(1)}s; see ${server.logFile}` });
    for (const w of workerDeaths(server.logFile)) anomalies.push({ check: 'server_exit', detail: `a cluster worker (pid ${w.pid}) died by itself (code ${w.code}, signal ${w.signal}); see ${server.logFile}` });
    for (const op of workload.ops) {
      if (!op.acked && !op.refused && op.retryable) {
        const last = op.answers.at(-1);
        if (last?.status === 409) anomalies.push({ check: 'key_stuck', detail: `${op.id} (${op.kind}, key ${op.idempotencyKey}) still answered 409 after the drain` });
      }
    }

    const operations: ChaosReport['operations'] = {};
    for (const op of workload.ops) {
      const k = `${op.kind}${op.kind === 'cash_out' || op.kind === 'tef' || op.kind === 'refund' || op.kind === 'charge' ? ` (${op.sign}${op.idempotencyKey ? ', key' : ''}${op.externalId ? ', external_id' : ''})` : ''}`;
      const e = (operations[k] ??= { sent: 0, acknowledged: 0, refused: 0, unresolved: 0 });
      e.sent++;
      if (op.acked) e.acknowledged++;
      else if (op.refused) e.refused++;
      else e.unresolved++;
    }
    const refusals: Record<string, number> = {};
    for (const op of workload.ops) {
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
    const timing = answerTimes(workload.ops, faultWindows, o.clientTimeoutMs);
    const byCheck: Record<string, number> = {};
    for (const a of anomalies) byCheck[a.check] = (byCheck[a.check] ?? 0) + 1;
    const figures: Record<string, number> = {
      operations: workload.ops.length,
      acknowledged: workload.ops.filter((x) => x.acked).length,
      requests_sent: workload.ops.reduce((a, x) => a + x.sends, 0),
      ...faults,
      server_starts: server.starts,
      ...workload.figures,
      replays: workload.ops.filter((x) => x.replay).length,
      burst_cash_outs: workload.ops.filter((x) => x.burst).length,
      limited_merchants_added: freshLimited,
      ...timing,
      refused: workload.ops.filter((x) => x.refused).length,
      ...result.figures,
      anomalies: anomalies.length,
    };
    return { seed: o.seed, figures, operations, anomalies, byCheck, refusals, faults: { ...faults }, stallSupported, dir };
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

/** Funds pressure (cents): the opening deposit of a broke merchant; daily and nighttime limits of a limited one. */
export const POOR = { deposit: 12_000, daily: 150_000, night: 100_000 };

/** The last `poorMerchants` merchants are under funds pressure: the first of them limited, the next broke, and so on. */
function pressureOf(i: number, o: ChaosOptions): 'limited' | 'broke' | undefined {
  const k = i - (o.merchants - o.poorMerchants);
  return k < 0 ? undefined : k % 2 === 0 ? 'limited' : 'broke';
}

/**
 * Figures of time (not anomalies: the machine's load moves them): answers' p50 and p99 in ms, and
 * the requests that got no answer within the client's deadline, by what was going on when they
 * were sent — a fault that stops the server or PostgreSQL or stalls the rail (plus 2 s), a hung
 * Redis (which must fail fast like a stopped one, issue 24, 17), or nothing.
 */
function answerTimes(ops: Op[], windows: { kind: string; from: number; to: number }[], timeoutMs: number): Record<string, number> {
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

/** How often a new limited merchant joins during the faults. */
const FRESH_LIMITED_EVERY_MS = 20_000;

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

export const WALL_CLOCK = join(packageRoot, 'bench', 'chaos', 'wallClock.mjs');

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
