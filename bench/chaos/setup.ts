/**
 * Set-up of a chaos run through the operator and sandbox APIs: the server's environment, the
 * receivers' PIX keys, and each merchant with its account, deposit, fees and limits, EVP key, API
 * key and webhook.
 */
import { randomBytes } from 'node:crypto';
import { validCnpj, validCpf } from '../../test/helpers/fixtures.js';
import type { AccountView } from './audit.js';
import { Merchant, type Operator } from './client.js';
import { sleep, type PixgateServer } from './infra.js';
import type { WebhookReceiver } from './receiver.js';

/** Funds pressure (cents): the opening deposit of a broke merchant; daily and nighttime limits of a limited one. */
export const POOR = { deposit: 12_000, daily: 150_000, night: 100_000 };

export type Pressure = 'limited' | 'broke' | undefined;

/** The last `poorMerchants` merchants are under funds pressure: the first of them limited, the next broke, and so on. */
export function pressureOf(i: number, o: { merchants: number; poorMerchants: number }): Pressure {
  const k = i - (o.merchants - o.poorMerchants);
  return k < 0 ? undefined : k % 2 === 0 ? 'limited' : 'broke';
}

/** The workload's merchants under funds pressure, by kind, and the nighttime limit of the limited ones. */
export function pressureGroups(o: { merchants: number; poorMerchants: number }): { limited: number[]; broke: number[]; limitedNightCents: number } {
  const all = Array.from({ length: o.merchants }, (_, i) => i);
  return { limited: all.filter((i) => pressureOf(i, o) === 'limited'), broke: all.filter((i) => pressureOf(i, o) === 'broke'), limitedNightCents: POOR.night };
}

/** The environment of the server under test (the rail deadline and lease far shorter than the defaults). */
export function serverEnv(o: { seed: number; webConcurrency: number }, urls: { db: string; redis: string }, receiverPort: number, adminToken: string, clockFile: string): Record<string, string> {
  return {
    DATABASE_URL: urls.db,
    REDIS_URL: urls.redis,
    ADMIN_TOKEN: adminToken,
    APP_ENV: 'local',
    LOG_LEVEL: 'warn',
    WEBHOOK_ALLOWED_HOSTS: `127.0.0.1:${receiverPort}`,
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
  };
}

/** The receivers' PIX keys in the directory: one that settles, one the receiving bank rejects, one held for fraud. */
export async function receiverKeys(operator: Operator): Promise<{ settle: string; reject: string; queued: string }> {
  const keys = { settle: 'chaos-settle@example.com', reject: 'chaos-reject@example.com', queued: 'chaos-queued@example.com' };
  for (const [what, key] of Object.entries(keys)) {
    await operator.must('sandbox', 'POST', '/dict/keys', { key, type: 'email', name: `Recebedor ${what}`, document: validCpf(), ispb: '60746948', ...(what === 'reject' ? { behavior: 'reject' } : {}), ...(what === 'queued' ? { fraud_flagged: true } : {}) });
  }
  return keys;
}

/** Everything the workload and the audit know of the merchants set up (index = Op.merchant). */
export interface Catalog {
  merchants: Merchant[];
  accounts: AccountView[];
  webhookIds: string[];
  evpKeys: string[];
  subscribed: string[];
}

export const emptyCatalog = (): Catalog => ({ merchants: [], accounts: [], webhookIds: [], evpKeys: [], subscribed: [] });

/** What adding a merchant uses. */
export interface SetupContext {
  operator: Operator;
  server: PixgateServer;
  receiver: WebhookReceiver;
  catalog: Catalog;
}

/**
 * One merchant with its account, deposit, fees and limits, EVP key, API key and webhook. Each
 * call is retried until answered (the deposit under an Idempotency-Key), so that a merchant added
 * while faults are injected is complete or absent from the workload.
 */
export async function addMerchant({ operator, server, receiver, catalog }: SetupContext, i: number, pressure: Pressure): Promise<void> {
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
  const merchant = new Merchant(server.url, m.merchant_id, m.account_id, k.client_id, k.client_secret);
  const events = await firingEvents(merchant);
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
}

/** The events that fire (GET /webhooks/events, retried until answered): what the receiver's webhooks subscribe to. */
async function firingEvents(merchant: Merchant): Promise<string[]> {
  let events: string[] = [];
  for (let tries = 0; events.length === 0; tries++) {
    const a = await merchant.get('/webhooks/events', 10_000);
    if (a.status === 200) events = (a.body as { event: string; firing: string }[]).filter((e) => e.firing === 'active').map((e) => e.event);
    else if (tries > 60) throw new Error(`GET /webhooks/events: ${a.status} ${a.text || a.error}`);
    else await sleep(500);
  }
  return events;
}

/**
 * Deposits join the mix only where a retried deposit is safe: the same Idempotency-Key twice must
 * name one deposit. Probes it with two deposits of 1 cent on the first account (counted in its opening).
 */
export async function depositsAreIdempotent(operator: Operator, catalog: Catalog, log: (line: string) => void): Promise<boolean> {
  const probe = () => operator.call('admin', 'POST', `/accounts/${catalog.merchants[0]!.accountId}/deposits`, { amount: 1, description: 'chaos-probe' }, 10_000, { 'idempotency-key': 'chaos-deposit-probe' });
  const [p1, p2] = [await probe(), await probe()];
  const idempotentDeposits = p1.status === 201 && (p2.status === 200 || p2.status === 201) && p1.body?.transaction_id === p2.body?.transaction_id;
  catalog.accounts[0]!.opening += 100 * new Set([p1, p2].filter((p) => p.status >= 200 && p.status < 300).map((p) => p.body?.transaction_id)).size;
  log(idempotentDeposits ? 'operator deposits honour Idempotency-Key: deposits join the mix' : 'operator deposits ignore Idempotency-Key: no deposits during the faults (a retry would credit twice)');
  return idempotentDeposits;
}

/** Whether the sandbox has the rail stall switch (GET /api/sandbox/rail/stall); without it the stall fault is skipped. */
export async function stallSwitchPresent(operator: Operator, log: (line: string) => void): Promise<boolean> {
  const stallProbe = await operator.call('sandbox', 'GET', '/rail/stall', undefined, 10_000);
  const stallSupported = stallProbe.status === 200;
  log(stallSupported ? `rail stall switch present: ${stallProbe.text}` : `rail stall switch absent (GET /api/sandbox/rail/stall answered ${stallProbe.status}): the stall fault is skipped`);
  return stallSupported;
}
