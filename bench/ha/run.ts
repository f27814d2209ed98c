/**
 * The high-availability run (`npm run ha`; a short one in test/ha.test.ts): the lab of ./lab.ts
 * driven by the chaos suite's clients (bench/chaos/workload.ts) while the primary's postmaster is
 * SIGKILLed (Patroni fails over to the synchronous standby), a planned switchover is made, the
 * synchronous standby is stopped and Redis is failed over by Sentinel; then the chaos suite's drain,
 * replays and audit (bench/chaos/audit.ts), plus a v2 nonce used before the Redis failover and
 * replayed after it. See docs/deploy.md.
 */
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { validCnpj, validCpf } from '../../test/helpers/fixtures.js';
import { audit, type AccountView, type Anomaly } from '../chaos/audit.js';
import { Merchant, Operator } from '../chaos/client.js';
import { sleep } from '../chaos/infra.js';
import { waitDrained } from '../chaos/drain.js';
import { WebhookReceiver } from '../chaos/receiver.js';
import { Workload, prng } from '../chaos/workload.js';
import { Lab, tearDownOnSignal, waitFor } from './lab.js';
import { WriteProbe, nonceReplayCheck, nonceUse } from './probes.js';

export interface HaOptions {
  seed: number;
  /** SIGKILLs of the primary's postmaster, each answered by a Patroni failover. */
  failovers: number;
  /** Planned switchovers (Patroni REST API). */
  switchovers: number;
  /** Stops of the synchronous standby (Patroni picks the other replica). */
  syncStops: number;
  /** Redis failovers by Sentinel. */
  redisFailovers: number;
  workers: number;
  merchants: number;
  appNodes: number;
  pooler: boolean;
  sentinel: boolean;
  clientTimeoutMs: number;
  drainMs: number;
  /** Pause between faults (ms, drawn in [min, max]). */
  gapMs: [number, number];
  keep: boolean;
  log: (line: string) => void;
}

export const HA_DEFAULTS: HaOptions = {
  seed: 1,
  failovers: 5,
  switchovers: 1,
  syncStops: 1,
  redisFailovers: 1,
  workers: 6,
  merchants: 3,
  appNodes: 2,
  pooler: false,
  sentinel: false,
  clientTimeoutMs: 5000,
  drainMs: 120_000,
  gapMs: [2000, 6000],
  keep: false,
  log: (line) => console.log(line),
};

export interface HaReport {
  seed: number;
  failovers: number;
  switchovers: number;
  syncStops: number;
  redisFailovers: number;
  acknowledged: number;
  lost: number;
  duplicated: number;
  /** Seconds from each SIGKILL to the first acknowledged write sent after it. */
  rto: number[];
  nonceReplay: string;
  figures: Record<string, number>;
  anomalies: Anomaly[];
  dir: string;
}

/** Audit checks that mean an acknowledged operation (or an event) is missing, or made twice. */
const LOST = new Set(['probe_lost', 'acknowledged_missing', 'rail_settled_not_booked', 'rail_inbound_not_credited', 'event_not_received', 'delivery_not_delivered', 'event_not_fanned_out', 'money_mismatch', 'balance_model']);
const DUPLICATED = new Set(['probe_duplicated', 'duplicate_order', 'duplicate_external_id', 'duplicate_event', 'rail_duplicate_payment', 'unexpected_duplicate', 'replay_mismatch']);

export async function runHa(partial: Partial<HaOptions> = {}): Promise<HaReport> {
  const o: HaOptions = { ...HA_DEFAULTS, ...partial };
  const t0 = Date.now();
  const log = (line: string) => o.log(`[ha +${((Date.now() - t0) / 1000).toFixed(1)}s] ${line}`);
  const random = prng(o.seed);
  const between = (a: number, b: number) => a + random() * (b - a);
  const receiver = new WebhookReceiver(0.03, prng(o.seed + 17));
  await receiver.start();
  const lab = new Lab({
    pooler: o.pooler,
    sentinel: o.sentinel,
    appNodes: o.appNodes,
    log,
    appEnv: {
      WEBHOOK_TIMEOUT_MS: '3000',
      WEBHOOK_RETRY_SCHEDULE: '500ms,1s,2s,2s,3s,3s,5s,5s,5s,5s',
      SIM_SETTLEMENT_MS: '800',
      SIM_PROTECTION_MS: '1500',
      SIM_SEED: String(o.seed),
      RAIL_TIMEOUT_MS: '2000',
      IDEMPOTENCY_LEASE_MS: '8000',
    },
  });
  const anomalies: Anomaly[] = [];
  const faultTimes: number[] = [];
  const faultWindows: Array<[number, number]> = [];
  const kills: { at: number; from: string; to?: string }[] = [];
  const done = { failovers: 0, switchovers: 0, syncStops: 0, redisFailovers: 0 };
  let workload: Workload | undefined;
  let probe: WriteProbe | undefined;
  let probeAccount = 0;
  let failed = true;
  let nonceReplay = 'not run';
  const stopOnSignal = tearDownOnSignal(lab, o.keep, log);
  try {
    await lab.start(receiver.port);
    const operator = new Operator(lab.appUrl, lab.adminToken);
    const keys = { settle: 'ha-settle@example.com', reject: 'ha-reject@example.com', queued: 'ha-queued@example.com' };
    for (const [what, key] of Object.entries(keys)) {
      await operator.must('sandbox', 'POST', '/dict/keys', { key, type: 'email', name: `Recebedor ${what}`, document: validCpf(), ispb: '60746948', ...(what === 'reject' ? { behavior: 'reject' } : {}), ...(what === 'queued' ? { fraud_flagged: true } : {}) });
    }
    const catalog = { merchants: [] as Merchant[], accounts: [] as AccountView[], webhookIds: [] as string[], evpKeys: [] as string[], subscribed: [] as string[] };
    for (let i = 0; i < o.merchants; i++) {
      const m = await operator.must('admin', 'POST', '/merchants', { name: `HA ${i}`, document: validCnpj() });
      const opening = 1_000_000_000;
      await operator.must('admin', 'POST', `/accounts/${m.account_id}/deposits`, { amount: opening });
      const fees = { cash_out_fee_cents: i % 2 ? 7 : 0, cash_in_fee_cents: i % 2 ? 0 : 5 };
      await operator.must('admin', 'PATCH', `/accounts/${m.account_id}`, { ...fees, cash_out_daily_limit_cents: 10_000_000_000, cash_out_nighttime_limit_cents: 10_000_000_000 });
      const evpKey = (await operator.must('admin', 'POST', '/pix-keys', { account_id: m.account_id, type: 'evp' })).key as string;
      const k = await operator.must('admin', 'POST', '/api-keys', { merchant_id: m.merchant_id, account_id: m.account_id, permissions: ['pix:write', 'pix:read', 'transfer:write', 'transfer:read', 'payment:write', 'payment:read', 'account:write', 'account:read', 'statement:read'], ip_whitelist: ['127.0.0.1', '::1'] });
      const merchant = new Merchant(lab.appUrl, m.merchant_id, m.account_id, k.client_id, k.client_secret);
      const events = ((await merchant.get('/webhooks/events', 10_000)).body as { event: string; firing: string }[]).filter((e) => e.firing === 'active').map((e) => e.event);
      catalog.subscribed = events;
      const secret = `ha-secret-${randomBytes(16).toString("hex")}`;
      receiver.secrets.set(String(m.merchant_id), secret);
      const w = await merchant.post('/webhooks', { url: receiver.url(String(m.merchant_id)), events, secret, allow_insecure: true }, { sign: 'v1', timeoutMs: 10_000 });
      if (w.status !== 201) throw new Error(`webhook registration: ${w.status} ${w.text}`);
      catalog.accounts.push({ accountId: m.account_id, merchant: i, opening: opening * 100, cashOutFee: fees.cash_out_fee_cents * 100, cashInFee: fees.cash_in_fee_cents * 100, webhookKey: String(m.merchant_id) });
      catalog.webhookIds.push(w.body.id);
      catalog.evpKeys.push(evpKey);
      catalog.merchants.push(merchant);
    }
    const probeMerchant = await operator.must('admin', 'POST', '/merchants', { name: 'HA probe', document: validCnpj() });
    probeAccount = probeMerchant.account_id;
    probe = new WriteProbe(operator, probeAccount);
    probe.start();
    workload = new Workload(catalog.merchants, operator, { seed: o.seed, workers: o.workers, clientTimeoutMs: o.clientTimeoutMs, keys, evpKeys: catalog.evpKeys, idempotentDeposits: true });
    workload.start();
    log(`${o.merchants} merchants, ${o.workers} clients through HAProxy to ${o.appNodes} pixgate nodes; faults: ${o.failovers} failovers, ${o.switchovers} switchovers, ${o.syncStops} synchronous-standby stops, ${o.redisFailovers} Redis failovers`);

    // The faults, in a seeded order, one at a time, each once the cluster is whole again.
    const plan = [...Array(o.failovers).fill('failover'), ...Array(o.switchovers).fill('switchover'), ...Array(o.syncStops).fill('sync_stop'), ...Array(o.redisFailovers).fill('redis_failover')] as string[];
    for (let i = plan.length - 1; i > 0; i--) {
      const j = Math.floor(random() * (i + 1));
      [plan[i], plan[j]] = [plan[j]!, plan[i]!];
    }
    for (const fault of plan) {
      await sleep(between(...o.gapMs));
      if (fault === 'failover') {
        const leader = await lab.leader();
        if (!leader) throw new Error('no leader before a failover');
        const at = Date.now();
        const pid = lab.sigkillPostmaster(leader);
        faultTimes.push(at);
        const kill = { at, from: leader.name } as (typeof kills)[number];
        kills.push(kill);
        log(`SIGKILL of the primary's postmaster (${leader.name}, pid ${pid})`);
        await waitFor(async () => {
          const n = await lab.leader();
          return !!n && n.name !== leader.name;
        }, 90_000, 'a new leader');
        kill.to = (await lab.leader())!.name;
        done.failovers++;
        log(`failover #${done.failovers}: ${leader.name} → ${kill.to} in ${((Date.now() - at) / 1000).toFixed(1)} s (Patroni); waiting for ${leader.name} to rejoin`);
        await lab.waitHealthy();
        faultTimes.push(Date.now());
        faultWindows.push([at, Date.now()]);
      } else if (fault === 'switchover') {
        const at = Date.now();
        faultTimes.push(at);
        const { from, to } = await lab.switchover();
        await waitFor(async () => (await lab.leader())?.name === to, 60_000, 'the switchover');
        done.switchovers++;
        log(`switchover #${done.switchovers}: ${from} → ${to} in ${((Date.now() - at) / 1000).toFixed(1)} s`);
        await lab.waitHealthy();
        faultTimes.push(Date.now());
        faultWindows.push([at, Date.now()]);
      } else if (fault === 'sync_stop') {
        const sync = await lab.syncStandby();
        if (!sync) throw new Error('no synchronous standby to stop');
        const at = Date.now();
        faultTimes.push(at);
        await lab.stopNode(sync);
        done.syncStops++;
        await waitFor(async () => {
          const s = await lab.syncStandby();
          return !!s && s.name !== sync.name;
        }, 60_000, 'another synchronous standby');
        log(`synchronous standby ${sync.name} stopped; ${(await lab.syncStandby())!.name} is synchronous now`);
        await sleep(between(2000, 5000));
        lab.startNode(sync);
        await lab.waitHealthy();
        faultTimes.push(Date.now());
        faultWindows.push([at, Date.now()]);
        log(`${sync.name} back`);
      } else {
        const used = await nonceUse(catalog.merchants[0]!, 'before');
        const crash = done.redisFailovers % 2 === 0;
        const at = Date.now();
        const { from, to } = await lab.redisFailover(crash);
        faultTimes.push(Date.now());
        done.redisFailovers++;
        log(`Redis failed over by Sentinel (${crash ? 'master SIGKILLed right after the nonce was used' : 'planned SENTINEL FAILOVER'}): ${from} → ${to}, ${((Date.now() - at) / 1000).toFixed(1)} s until the new master has its replica`);
        nonceReplay = await nonceReplayCheck(catalog.merchants[0]!, used, anomalies);
        log(`v2 nonce used before the Redis failover, replayed after it: ${nonceReplay}`);
      }
      for (const app of lab.apps) {
        if (!app.alive()) {
          anomalies.push({ check: 'server_exit', detail: `pixgate on ${app.port} died during the faults; see ${app.logFile}` });
          await app.start();
        }
      }
    }
    log(`faults over: ${JSON.stringify(done)}; draining`);
    workload.retryDeadline = Date.now() + o.drainMs / 2;
    await workload.stop();
    await probe.stop();

    const db = new pg.Client({ connectionString: lab.primaryUrl() });
    await db.connect();
    await waitDrained(db, o.drainMs, 'after the faults', anomalies);
    log('drained; resending every acknowledged keyed operation');
    await workload.replayAcknowledged();
    await waitDrained(db, o.drainMs, 'after the replays', anomalies);
    await Promise.all(lab.apps.map((a) => a.kill('SIGTERM')));
    log('auditing');
    const result = await audit({ query: async (text, params) => (await db.query(text, params)).rows, ops: workload.ops, receipts: receiver.receipts, faultTimes, faultWindows, webhookIds: catalog.webhookIds, subscribed: catalog.subscribed, accounts: catalog.accounts });
    // The probe's deposits: each acknowledged one exactly once (the last, unacknowledged one may or may not have been made).
    const [made] = (await db.query(`SELECT count(*)::int AS n, count(DISTINCT description)::int AS d FROM transactions WHERE account_id = $1 AND kind = 'deposit'`, [probeAccount])).rows as { n: number }[];
    if (made!.n < probe.acks.length) anomalies.push({ check: 'probe_lost', detail: `${probe.acks.length} probe deposits acknowledged, ${made!.n} in the books` });
    if (made!.n > probe.acks.length + 1) anomalies.push({ check: 'probe_duplicated', detail: `${probe.acks.length} probe deposits acknowledged, ${made!.n} in the books` });
    await db.end();
    anomalies.push(...result.anomalies);
    for (const n of workload.notes) anomalies.push({ check: n.check ?? (n.what === 'client error' ? 'harness' : 'answer'), detail: `${n.op}: ${n.what}: ${n.detail}` });
    for (const app of lab.apps) for (const e of app.unexpectedExits) anomalies.push({ check: 'server_exit', detail: `pixgate on ${app.port} exited on its own (code ${e.code}, signal ${e.signal}); see ${app.logFile}` });
    // Anything acknowledged but still unresolved is an anomaly of the audit; unresolved (never acknowledged) operations are not.
    const rto = kills.map((k) => probe!.rtoAfter(k.at)).filter((x): x is number => x !== undefined);
    if (rto.length < kills.length) anomalies.push({ check: 'no_write_after_failover', detail: `${kills.length - rto.length} failovers were followed by no acknowledged write` });
    const acknowledged = workload.ops.filter((x) => x.acked).length + probe.acks.length;
    const figures: Record<string, number> = {
      operations: workload.ops.length,
      acknowledged,
      probe_writes_acknowledged: probe.acks.length,
      refused: workload.ops.filter((x) => x.refused).length,
      unresolved: workload.ops.filter((x) => !x.acked && !x.refused).length,
      requests_sent: workload.ops.reduce((a, x) => a + x.sends, 0),
      ...workload.figures,
      answers_503: workload.ops.reduce((a, x) => a + x.answers.filter((y) => y.status === 503).length, 0),
      ...result.figures,
      anomalies: anomalies.length,
    };
    failed = false;
    return {
      seed: o.seed,
      ...done,
      acknowledged,
      lost: anomalies.filter((a) => LOST.has(a.check)).length,
      duplicated: anomalies.filter((a) => DUPLICATED.has(a.check)).length,
      rto,
      nonceReplay,
      figures,
      anomalies,
      dir: lab.dir,
    };
  } finally {
    stopOnSignal();
    await workload?.stop().catch(() => {});
    await probe?.stop().catch(() => {});
    await receiver.stop().catch(() => {});
    // Kept after an anomaly or an error (the logs say why).
    if (failed) log(`failed: logs kept in ${lab.dir}`);
    await lab.destroy(o.keep || failed || anomalies.length > 0).catch(() => {});
  }
}

const quantile = (xs: number[], q: number) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length ? s[Math.min(s.length - 1, Math.ceil(q * s.length) - 1)]! : 0;
};

export function formatHa(r: HaReport): string {
  const lines = [`ha run, seed ${r.seed}`, '', 'figures:'];
  for (const [k, v] of Object.entries(r.figures)) lines.push(`  ${k.padEnd(32)} ${v}`);
  lines.push('', `rto per failover (s): ${r.rto.map((x) => x.toFixed(2)).join(', ') || '-'}`);
  lines.push(`v2 nonce replayed after the Redis failover: ${r.nonceReplay}`);
  lines.push(`synchronous-standby stops: ${r.syncStops}, Redis failovers: ${r.redisFailovers}`);
  const byCheck: Record<string, number> = {};
  for (const a of r.anomalies) byCheck[a.check] = (byCheck[a.check] ?? 0) + 1;
  lines.push('', 'anomalies by check:');
  for (const [k, v] of Object.entries(byCheck).sort()) lines.push(`  ${k.padEnd(32)} ${v}`);
  lines.push('', `anomalies: ${r.anomalies.length}`);
  for (const a of r.anomalies.slice(0, 100)) lines.push(`  [${a.check}] ${a.detail}`);
  if (r.anomalies.length > 0) lines.push(`logs kept in ${r.dir}`);
  lines.push(`ha: failovers ${r.failovers}, switchovers ${r.switchovers}, acknowledged ${r.acknowledged}, lost ${r.lost}, duplicated ${r.duplicated}, rto_p50 ${quantile(r.rto, 0.5).toFixed(1)}s, rto_p99 ${quantile(r.rto, 0.99).toFixed(1)}s`);
  return lines.join('\n');
}
