/**
 * The high-availability run (`npm run ha`; a short one in test/ha.test.ts): the lab of ./lab.ts
 * driven by the chaos suite's clients (bench/chaos/workload.ts) while the primary's postmaster is
 * SIGKILLed (Patroni fails over to the synchronous standby), a planned switchover is made, the
 * synchronous standby is stopped and Redis is failed over by Sentinel; then the chaos suite's drain,
 * replays and audit (bench/chaos/audit.ts), plus a v2 nonce used before the Redis failover and
 * replayed after it. See docs/deploy.md.
 */
import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import pg from 'pg';
import { signV2 } from '../../src/auth/hmac.js';
import { canonicalize } from '../../src/lib/canonicalJson.js';
import { validCnpj, validCpf } from '../../test/helpers/fixtures.js';
import { audit, type AccountView, type Anomaly } from '../chaos/audit.js';
import { Merchant, Operator } from '../chaos/client.js';
import { postgresBin, sleep } from '../chaos/infra.js';
import { waitDrained } from '../chaos/drain.js';
import { WebhookReceiver } from '../chaos/receiver.js';
import { Workload, prng } from '../chaos/workload.js';
import { Lab, waitFor } from './lab.js';

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
      } else if (fault === 'switchover') {
        const at = Date.now();
        faultTimes.push(at);
        const { from, to } = await lab.switchover();
        await waitFor(async () => (await lab.leader())?.name === to, 60_000, 'the switchover');
        done.switchovers++;
        log(`switchover #${done.switchovers}: ${from} → ${to} in ${((Date.now() - at) / 1000).toFixed(1)} s`);
        await lab.waitHealthy();
        faultTimes.push(Date.now());
      } else if (fault === 'sync_stop') {
        const sync = await lab.syncStandby();
        if (!sync) throw new Error('no synchronous standby to stop');
        faultTimes.push(Date.now());
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
    const result = await audit({ query: async (text, params) => (await db.query(text, params)).rows, ops: workload.ops, receipts: receiver.receipts, faultTimes, webhookIds: catalog.webhookIds, subscribed: catalog.subscribed, accounts: catalog.accounts });
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

/**
 * The RTO probe: an operator deposit of 1 cent into an account of its own every 100 ms, through
 * the balancer, each under its Idempotency-Key and resent with it until acknowledged (so a lost
 * answer never credits twice). The workload's clients back off exponentially while the database
 * is away, so their first success after a failover says more about their backoff than about the
 * failover; the probe does not back off.
 */
class WriteProbe {
  readonly acks: { sent: number; at: number }[] = [];
  private running = true;
  private loop: Promise<void> | undefined;
  constructor(
    private readonly operator: Operator,
    private readonly accountId: number,
  ) {}
  start(): void {
    this.loop = (async () => {
      for (let n = 1; this.running; n++) {
        const key = `ha-probe-${n}`;
        while (this.running) {
          const sent = Date.now();
          const a = await this.operator.call('admin', 'POST', `/accounts/${this.accountId}/deposits`, { amount: 1, description: 'ha-probe' }, 2000, { 'idempotency-key': key });
          if (a.status >= 200 && a.status < 300) {
            this.acks.push({ sent, at: Date.now() });
            break;
          }
          await sleep(100);
        }
        await sleep(100);
      }
    })();
  }
  async stop(): Promise<void> {
    this.running = false;
    await this.loop;
  }
  /** Seconds from `at` to the first acknowledged write sent after it. */
  rtoAfter(at: number): number | undefined {
    const first = this.acks.find((a) => a.sent >= at);
    return first ? (first.at - at) / 1000 : undefined;
  }
}

/**
 * A v2-signed cash-out whose body is refused (no amount): it passes the signature, consumes its
 * nonce and has no effect on the books, so the audit is untouched.
 */
async function nonceUse(merchant: Merchant, tag: string): Promise<{ nonce: string; status: number }> {
  const nonce = `ha-nonce-${randomBytes(12).toString('hex')}`;
  for (let tries = 0; tries < 20; tries++) {
    const a = await signedWithNonce(merchant, nonce, { description: `ha-nonce-${tag}` }, `ha-nonce-key-${tag}-${nonce}`);
    if (a.status !== 0 && a.status < 500) return { nonce, status: a.status };
    await sleep(500);
  }
  throw new Error('the nonce probe got no answer before the Redis failover');
}

/** The nonce used before the failover, with another body and key (a replay attack): must be 409. */
async function nonceReplayCheck(merchant: Merchant, used: { nonce: string; status: number }, anomalies: Anomaly[]): Promise<string> {
  for (let tries = 0; tries < 40; tries++) {
    const a = await signedWithNonce(merchant, used.nonce, { description: 'ha-nonce-replay' }, `ha-nonce-key-replay-${used.nonce}`);
    if (a.status === 0 || a.status >= 500) {
      await sleep(500);
      continue;
    }
    if (a.status === 409 && /X-Request-Nonce was already used/.test(a.text)) return 'refused (409)';
    anomalies.push({ check: 'nonce_replay_accepted', detail: `a v2 nonce used before the Redis failover (answered ${used.status}) was accepted after it for another request: ${a.status} ${a.text.slice(0, 200)}` });
    return `ACCEPTED (${a.status})`;
  }
  anomalies.push({ check: 'nonce_replay_accepted', detail: 'the nonce replay got no answer after the Redis failover' });
  return 'no answer';
}

async function signedWithNonce(merchant: Merchant, nonce: string, body: Record<string, unknown>, idempotencyKey: string) {
  const text = JSON.stringify(body);
  const timestamp = String(Math.floor(Date.now() / 1000));
  const path = '/pix/cash-out';
  const headers = {
    authorization: `ApiKey ${merchant.clientId}:${merchant.clientSecret}`,
    'content-type': 'application/json',
    'x-signature-version': '2',
    'x-request-timestamp': timestamp,
    'x-request-nonce': nonce,
    'idempotency-key': idempotencyKey,
    hmac: signV2(merchant.clientSecret, { timestamp, nonce, method: 'POST', path: `/api/external${path}`, idempotencyKey, canonicalBody: canonicalize(text) }),
  };
  try {
    const res = await fetch(`${merchant.baseUrl}/api/external${path}`, { method: 'POST', headers, body: text, signal: AbortSignal.timeout(5000) });
    return { status: res.status, text: await res.text() };
  } catch {
    return { status: 0, text: '' };
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

/**
 * `npm run ha -- --bench`: no faults. pgbench (TPC-B-like, the same number of clients) against the
 * synchronously replicated primary through HAProxy, then signed cash-outs through the balancer for
 * the same time; the line printed gives both rates and their ratio.
 */
export async function runBench(partial: Partial<HaOptions> & { seconds?: number } = {}): Promise<string> {
  const o: HaOptions = { ...HA_DEFAULTS, ...partial };
  const seconds = partial.seconds ?? 20;
  const t0 = Date.now();
  const log = (line: string) => o.log(`[ha bench +${((Date.now() - t0) / 1000).toFixed(1)}s] ${line}`);
  const receiver = new WebhookReceiver(0, prng(o.seed));
  await receiver.start();
  const lab = new Lab({ pooler: o.pooler, sentinel: o.sentinel, appNodes: o.appNodes, log, appEnv: { SIM_SETTLEMENT_MS: '200', SIM_PROTECTION_MS: '0' } });
  const stopOnSignal = tearDownOnSignal(lab, o.keep, log);
  try {
    await lab.start(receiver.port);
    const db = new pg.Client({ connectionString: lab.primaryUrl('postgres') });
    await db.connect();
    await db.query('CREATE DATABASE bench');
    await db.end();
    const pgbench = join(postgresBin()!, 'pgbench');
    const url = `postgres://postgres@127.0.0.1:${lab.ports.haproxyPg}/bench`;
    const init = spawnSync(pgbench, ['-i', '-q', '-s', '10', url], { encoding: 'utf8' });
    if (init.status !== 0) throw new Error(`pgbench -i: ${init.stderr}`);
    const run = spawnSync(pgbench, ['-c', String(o.workers), '-j', '2', '-T', String(seconds), url], { encoding: 'utf8' });
    const tps = Number(/tps = ([\d.]+)/.exec(run.stdout)?.[1] ?? NaN);
    log(`pgbench: ${tps.toFixed(0)} tps (TPC-B-like, ${o.workers} clients, synchronous standby)`);

    const operator = new Operator(lab.appUrl, lab.adminToken);
    await operator.must('sandbox', 'POST', '/dict/keys', { key: 'bench-settle@example.com', type: 'email', name: 'Recebedor', document: validCpf(), ispb: '60746948' });
    const m = await operator.must('admin', 'POST', '/merchants', { name: 'HA bench', document: validCnpj() });
    await operator.must('admin', 'POST', `/accounts/${m.account_id}/deposits`, { amount: 100_000_000_000 });
    await operator.must('admin', 'PATCH', `/accounts/${m.account_id}`, { cash_out_daily_limit_cents: 1_000_000_000_000, cash_out_nighttime_limit_cents: 1_000_000_000_000 });
    const k = await operator.must('admin', 'POST', '/api-keys', { merchant_id: m.merchant_id, account_id: m.account_id, permissions: ['pix:write', 'pix:read', 'transfer:write', 'transfer:read'], ip_whitelist: ['127.0.0.1', '::1'] });
    const merchant = new Merchant(lab.appUrl, m.merchant_id, m.account_id, k.client_id, k.client_secret);
    let acked = 0;
    let other = 0;
    let n = 0;
    const end = Date.now() + seconds * 1000;
    await Promise.all(
      Array.from({ length: o.workers }, async () => {
        while (Date.now() < end) {
          const i = ++n;
          const a = await merchant.post('/pix/cash-out', { amount: 100, pix_key: 'bench-settle@example.com', description: `bench-${i}` }, { sign: 'v1', idempotencyKey: `bench-${i}`, timeoutMs: 10_000 });
          if (a.status >= 200 && a.status < 300) acked++;
          else if (other++ === 0) log(`first refusal: ${a.status} ${a.text.slice(0, 300)}`);
        }
      }),
    );
    const rate = acked / seconds;
    log(`cash-outs: ${rate.toFixed(0)}/s acknowledged (${other} other answers), ${o.workers} clients, ${o.appNodes} app nodes`);
    return `ha bench: pgbench ${tps.toFixed(0)} tps, cash-outs ${rate.toFixed(0)}/s, ratio ${(rate / tps).toFixed(2)} (synchronous standby, ${o.workers} clients, ${o.appNodes} app nodes${o.pooler ? ', pgbouncer' : ''})`;
  } finally {
    stopOnSignal();
    await receiver.stop().catch(() => {});
    await lab.destroy(o.keep).catch(() => {});
  }
}

/** On Ctrl-C (SIGINT) or SIGTERM: every process of the lab stopped and its folder removed, then exit 130. Returns the uninstaller. */
function tearDownOnSignal(lab: Lab, keep: boolean, log: (line: string) => void): () => void {
  const handler = () => {
    log('interrupted: killing the lab');
    lab.killAllNow(keep);
    process.exit(130);
  };
  process.once('SIGINT', handler);
  process.once('SIGTERM', handler);
  return () => {
    process.removeListener('SIGINT', handler);
    process.removeListener('SIGTERM', handler);
  };
}
