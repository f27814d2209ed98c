/**
 * The HA run's probes (bench/ha/run.ts): a write probe that measures the time to the first
 * acknowledged write after a fault, and a v2 nonce used before a Redis failover and replayed after it.
 */
import { randomBytes } from 'node:crypto';
import { signV2 } from '../../src/auth/hmac.js';
import { canonicalize } from '../../src/lib/canonicalJson.js';
import type { Anomaly } from '../chaos/audit.js';
import type { Merchant, Operator } from '../chaos/client.js';
import { sleep } from '../chaos/infra.js';

/**
 * The RTO probe: an operator deposit of 1 cent into an account of its own every 100 ms, through
 * the balancer, each under its Idempotency-Key and resent with it until acknowledged (so a lost
 * answer never credits twice). The workload's clients back off exponentially while the database
 * is away, so their first success after a failover says more about their backoff than about the
 * failover; the probe does not back off.
 */
export class WriteProbe {
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
export async function nonceUse(merchant: Merchant, tag: string): Promise<{ nonce: string; status: number }> {
  const nonce = `ha-nonce-${randomBytes(12).toString('hex')}`;
  for (let tries = 0; tries < 20; tries++) {
    const a = await signedWithNonce(merchant, nonce, { description: `ha-nonce-${tag}` }, `ha-nonce-key-${tag}-${nonce}`);
    if (a.status !== 0 && a.status < 500) return { nonce, status: a.status };
    await sleep(500);
  }
  throw new Error('the nonce probe got no answer before the Redis failover');
}

/** The nonce used before the failover, with another body and key (a replay attack): must be 409. */
export async function nonceReplayCheck(merchant: Merchant, used: { nonce: string; status: number }, anomalies: Anomaly[]): Promise<string> {
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
