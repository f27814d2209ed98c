/**
 * The fault-injection suite (`npm run chaos`; a short run inside `npm test`): pixgate on its own
 * PostgreSQL and Redis, driven by concurrent clients while the server is SIGKILLed and restarted,
 * the rail stalled, PostgreSQL restarted and Redis stopped; then a drain and an audit.
 * See docs/chaos.md.
 */
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { validCnpj, validCpf } from '../../test/helpers/fixtures.js';
import { audit, type Anomaly } from './audit.js';
import { Merchant, Operator } from './client.js';
import { PixgateServer, PostgresCluster, RedisServer, freePort, sleep } from './infra.js';
import { WebhookReceiver } from './receiver.js';
import { Workload, prng } from './workload.js';

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
  workers: number;
  merchants: number;
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
  workers: 8,
  merchants: 4,
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
  const faults = { kills: 0, pg_restarts: 0, redis_stops: 0, stalls: 0 };
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
      },
      await freePort(),
      join(dir, 'pixgate.log'),
    );
    await server.start();
    const operator = new Operator(server.url, adminToken);

    // Set-up through the operator and sandbox APIs (before any fault).
    const keys = { settle: 'chaos-settle@example.com', reject: 'chaos-reject@example.com', queued: 'chaos-queued@example.com' };
    for (const [what, key] of Object.entries(keys)) {
      await operator.must('sandbox', 'POST', '/dict/keys', { key, type: 'email', name: `Recebedor ${what}`, document: validCpf(), ispb: '60746948', ...(what === 'reject' ? { behavior: 'reject' } : {}), ...(what === 'queued' ? { fraud_flagged: true } : {}) });
    }
    const catalog = await (async () => {
      const merchants: Merchant[] = [];
      const webhookIds: string[] = [];
      const evpKeys: string[] = [];
      let subscribed: string[] = [];
      for (let i = 0; i < o.merchants; i++) {
        const m = await operator.must('admin', 'POST', '/merchants', { name: `Chaos ${i}`, document: validCnpj() });
        await operator.must('admin', 'POST', `/accounts/${m.account_id}/deposits`, { amount: 1_000_000_000 });
        await operator.must('admin', 'PATCH', `/accounts/${m.account_id}`, { cash_out_fee_cents: i % 2 ? 7 : 0, cash_in_fee_cents: i % 2 ? 0 : 5, cash_out_daily_limit_cents: 10_000_000_000, cash_out_nighttime_limit_cents: 10_000_000_000 });
        evpKeys.push((await operator.must('admin', 'POST', '/pix-keys', { account_id: m.account_id, type: 'evp' })).key);
        const k = await operator.must('admin', 'POST', '/api-keys', { merchant_id: m.merchant_id, account_id: m.account_id, permissions: ['pix:write', 'pix:read', 'transfer:write', 'transfer:read', 'payment:write', 'payment:read', 'account:write', 'account:read', 'statement:read'], ip_whitelist: ['127.0.0.1', '::1'] });
        const merchant = new Merchant(server!.url, m.merchant_id, m.account_id, k.client_id, k.client_secret);
        const events = ((await merchant.get('/webhooks/events', 10_000)).body as { event: string; firing: string }[]).filter((e) => e.firing === 'active').map((e) => e.event);
        subscribed = events;
        const secret = `whsec_chaos_${randomBytes(16).toString('hex')}`;
        receiver.secrets.set(String(m.merchant_id), secret);
        const w = await merchant.post('/webhooks', { url: receiver.url(String(m.merchant_id)), events, secret, allow_insecure: true }, { sign: 'v1', timeoutMs: 10_000 });
        if (w.status !== 201) throw new Error(`webhook registration: ${w.status} ${w.text}`);
        webhookIds.push(w.body.id);
        merchants.push(merchant);
      }
      return { merchants, webhookIds, evpKeys, subscribed };
    })();
    // Deposits join the mix only where a retried deposit is safe: the same Idempotency-Key twice must name one deposit.
    const probe = () => operator.call('admin', 'POST', `/accounts/${catalog.merchants[0]!.accountId}/deposits`, { amount: 1, description: 'chaos-probe' }, 10_000, { 'idempotency-key': 'chaos-deposit-probe' });
    const [p1, p2] = [await probe(), await probe()];
    const idempotentDeposits = p1.status === 201 && (p2.status === 200 || p2.status === 201) && p1.body?.transaction_id === p2.body?.transaction_id;
    log(idempotentDeposits ? 'operator deposits honour Idempotency-Key: deposits join the mix' : 'operator deposits ignore Idempotency-Key: no deposits during the faults (a retry would credit twice)');
    const stallProbe = await operator.call('sandbox', 'GET', '/rail/stall', undefined, 10_000);
    stallSupported = stallProbe.status === 200;
    log(stallSupported ? `rail stall switch present: ${stallProbe.text}` : `rail stall switch absent (GET /api/sandbox/rail/stall answered ${stallProbe.status}): the stall fault is skipped`);

    workload = new Workload(catalog.merchants, operator, { seed: o.seed, workers: o.workers, clientTimeoutMs: o.clientTimeoutMs, keys, evpKeys: catalog.evpKeys, idempotentDeposits });
    workload.start();

    // Faults, one at a time, at seeded random moments, until every minimum is met and the time is up.
    const faultStart = Date.now();
    const want = { kills: o.kills, pg_restarts: o.pgRestarts, redis_stops: o.redisStops, stalls: stallSupported ? o.stalls : 0 };
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
      let kind = roll < 0.6 ? 'kills' : roll < 0.73 ? 'pg_restarts' : roll < 0.86 ? 'redis_stops' : 'stalls';
      if (kind === 'stalls' && !stallSupported) kind = 'kills';
      if (behind.length > 0 && !behind.includes(kind) && random() < 0.5) kind = behind[Math.floor(random() * behind.length)]!;
      if (kind === 'kills') {
        faultTimes.push(Date.now());
        await server.kill('SIGKILL');
        faults.kills++;
        log(`SIGKILL #${faults.kills}`);
        await sleep(between(0, 1500));
        await server.start();
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
    }
    log(`faults over: ${JSON.stringify(faults)}; draining`);

    // Drain: everything up, clients finish (retrying) their last operation, the system settles.
    if (!server.alive()) await server.start();
    await ensureStallCleared();
    workload.retryDeadline = Date.now() + o.drainMs / 2;
    await workload.stop();
    const db = new pg.Client({ connectionString: pgc.url });
    await db.connect();
    const inFlight = async () => {
      const [r] = (
        await db.query(`SELECT
          (SELECT count(*) FROM transactions WHERE kind IN ('cash_out', 'refund', 'med_refund') AND stage < 3)::int AS payouts,
          (SELECT count(*) FROM med_infractions WHERE refund_status = 'processing')::int AS med_refunds,
          (SELECT count(*) FROM sim_notifications)::int AS rail_notifications,
          (SELECT count(*) FROM sim_payments WHERE status IN ('protection', 'in_flight'))::int AS rail_payments,
          (SELECT count(*) FROM outbox_pending)::int AS undispatched,
          (SELECT count(*) FROM webhook_deliveries WHERE status = 'pending')::int AS deliveries`)
      ).rows as Record<string, number>[];
      return r!;
    };
    const waitDrained = async (label: string) => {
      const deadline = Date.now() + o.drainMs;
      for (;;) {
        const r = await inFlight();
        if (Object.values(r).every((n) => n === 0)) return;
        if (Date.now() > deadline) {
          anomalies.push({ check: 'did_not_drain', detail: `${label}: still in flight after ${o.drainMs} ms: ${JSON.stringify(r)}` });
          return;
        }
        await sleep(500);
      }
    };
    await waitDrained('after the faults');
    log('drained; resending every acknowledged keyed operation');
    await workload.replayAcknowledged();
    await waitDrained('after the replays');
    await server.kill('SIGTERM');
    log('auditing');

    const result = await audit({ query: async (text, params) => (await db.query(text, params)).rows, ops: workload.ops, receipts: receiver.receipts, faultTimes, webhookIds: catalog.webhookIds, subscribed: catalog.subscribed });
    await db.end();
    anomalies.push(...result.anomalies);
    for (const n of workload.notes) anomalies.push({ check: n.what === 'client error' ? 'harness' : 'answer', detail: `${n.op}: ${n.what}: ${n.detail}` });
    for (const e of server.unexpectedExits) anomalies.push({ check: 'server_exit', detail: `pixgate exited on its own (code ${e.code}, signal ${e.signal}) at +${((e.at - t0) / 1000).toFixed(1)}s; see ${server.logFile}` });
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
    const figures: Record<string, number> = {
      operations: workload.ops.length,
      acknowledged: workload.ops.filter((x) => x.acked).length,
      requests_sent: workload.ops.reduce((a, x) => a + x.sends, 0),
      ...faults,
      server_starts: server.starts,
      ...workload.figures,
      replays: workload.ops.filter((x) => x.replay).length,
      ...result.figures,
      anomalies: anomalies.length,
    };
    return { seed: o.seed, figures, operations, anomalies, stallSupported, dir };
  } finally {
    await workload?.stop().catch(() => {});
    if (server) await server.kill('SIGKILL').catch(() => {});
    await receiver.stop().catch(() => {});
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
  lines.push('', `anomalies: ${r.anomalies.length}`);
  for (const a of r.anomalies.slice(0, 200)) lines.push(`  [${a.check}] ${a.detail}`);
  if (r.anomalies.length > 200) lines.push(`  … ${r.anomalies.length - 200} more`);
  if (r.anomalies.length > 0) lines.push('', `logs kept in ${r.dir}; replay with: npm run chaos -- --seed ${r.seed}`);
  return lines.join('\n');
}

export function readLogTail(file: string, chars = 4000): string {
  try {
    return readFileSync(file, 'utf8').slice(-chars);
  } catch {
    return '';
  }
}
