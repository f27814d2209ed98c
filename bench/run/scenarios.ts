/** The scenarios beside the cash-outs: the request pipeline alone, an idle server, and cash-outs with webhooks. */
import { randomBytes } from 'node:crypto';
import { createServer as createHttpServer } from 'node:http';
import { performance } from 'node:perf_hooks';
import type { Pool } from 'undici';
import { signV1, signV2 } from '../../src/auth/hmac.js';
import { canonicalize } from '../../src/lib/canonicalJson.js';
import { auth, cashOuts, merchant, type BenchRequest, type Merchant } from '../lib.js';
import { env, SECONDS, WARMUP_SECONDS } from './config.js';
import { run, statementCounts } from './measure.js';
import { ms, percentile, report, sum, summary } from './summary.js';
import type { Target } from './target.js';

/** The request pipeline alone: GET /balance (stages 1-4, 7) and a signed POST /cpf/validate (all 8). */
export function balances(m: Merchant) {
  return (): BenchRequest => ({ path: '/api/external/balance', method: 'GET', headers: { authorization: auth(m) } });
}

export function cpfValidations(m: Merchant, version: 1 | 2) {
  const text = JSON.stringify({ cpf: '529.982.247-25' });
  const canonical = canonicalize(text);
  const runId = randomBytes(6).toString('hex');
  let seq = 0; // fresh nonce and Idempotency-Key for every request
  return (): BenchRequest => {
    const n = seq++;
    const headers: Record<string, string> = { authorization: auth(m), 'content-type': 'application/json' };
    if (version === 1) {
      headers.hmac = signV1(m.secret, canonical);
    } else {
      const timestamp = String(Math.floor(Date.now() / 1000));
      const nonce = `${runId}-${n}-nonce`;
      const idempotencyKey = `bench-${runId}-${n}`;
      Object.assign(headers, {
        'x-signature-version': '2',
        'x-request-timestamp': timestamp,
        'x-request-nonce': nonce,
        'idempotency-key': idempotencyKey,
        hmac: signV2(m.secret, { timestamp, nonce, method: 'POST', path: '/api/external/cpf/validate', idempotencyKey, canonicalBody: canonical }),
      });
    }
    return { path: '/api/external/cpf/validate', method: 'POST', headers, body: text };
  };
}

/** Statements per second of an idle server (no requests), from its own counter. */
export async function idle(t: Target, workers: number): Promise<void> {
  await new Promise((r) => setTimeout(r, 3_000)); // let start-up work (migrations, first ticks) finish
  const total = async () => {
    const bySource = statementCounts(await t.metrics());
    return bySource && sum(bySource.values());
  };
  const a = await total();
  const t0 = performance.now();
  await new Promise((r) => setTimeout(r, 10_000));
  const b = await total();
  const seconds = (performance.now() - t0) / 1000;
  // The scrape itself issues no database statement; gauges read from the database would, so the
  // counter's own scrape is taken once at each end and its share (if any) is included honestly.
  if (a === undefined || b === undefined) console.log('idle: pixgate_db_statements_total not exposed by this server; skipped');
  else {
    const rate = (b - a) / seconds;
    console.log(`idle: ${rate.toFixed(1)} database statements/s over ${seconds.toFixed(0)} s (all processes, WEB_CONCURRENCY=${workers})`);
    summary.push({ workers, scenario: 'idle database statements/s', throughput: rate, p99: NaN, versus: null });
  }
}

/** Receipts of webhook deliveries at a local receiver. */
export function webhookReceiver() {
  const received: { at: number; event: string; transactionId?: string; settledAt?: string }[] = [];
  const server = createHttpServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const at = Date.now();
      try {
        const body = JSON.parse(Buffer.concat(chunks).toString()) as { event: string; transaction_id?: string; settled_at?: string };
        received.push({ at, event: body.event, ...(body.transaction_id ? { transactionId: body.transaction_id } : {}), ...(body.settled_at ? { settledAt: body.settled_at } : {}) });
      } catch {
        // not ours
      }
      res.writeHead(200).end();
    });
  });
  return { server, received };
}

export async function webhookScenario(t: Target, workers: number, pool: Pool, pixKey: string, receiver: ReturnType<typeof webhookReceiver>, port: number) {
  // Ten accounts, each with a webhook for its payout events: every cash-out is delivered twice
  // (pix.payout.processing at once, pix.payout.confirmed after settlement).
  const accounts = await Promise.all(Array.from({ length: 10 }, () => merchant(t)));
  const registration = JSON.stringify({ url: `http://127.0.0.1:${port}/hook`, events: ['pix.payout.processing', 'pix.payout.confirmed'], allow_insecure: true });
  for (const m of accounts) {
    const r = await fetch(`${t.url}/api/external/webhooks`, {
      method: 'POST',
      headers: { authorization: auth(m), 'content-type': 'application/json', hmac: signV1(m.secret, canonicalize(registration)) },
      body: registration,
    });
    if (r.status !== 201) throw new Error(`webhook registration: ${r.status} ${await r.text()}`);
  }
  const answeredAt = new Map<string, number>();
  const next = cashOuts(accounts, pixKey, (b) => b.transaction_id && measuring && answeredAt.set(b.transaction_id, Date.now()));
  // Warm-up and ANALYZE as for the other scenarios (webhook_deliveries then has statistics); only
  // the deliveries of the measured run's cash-outs are counted.
  let measuring = false;
  await run(t, pool, WARMUP_SECONDS, next);
  if (env.BENCH_ANALYZE !== '0') await t.analyze();
  measuring = true;
  receiver.received.length = 0;
  const started = Date.now();
  const r = await run(t, pool, SECONDS, next, `${workers}-webhooks`);
  // Let the last settlements and deliveries arrive: until every expected delivery is in, or 30 s
  // without progress; the drain time after the load stopped is printed.
  const loadEnded = Date.now();
  let lastCount = -1;
  let lastProgress = Date.now();
  const measured = () => receiver.received.filter((x) => x.transactionId && answeredAt.has(x.transactionId));
  while (measured().length < 2 * answeredAt.size && Date.now() - lastProgress < 30_000) {
    const count = receiver.received.length;
    if (count !== lastCount) {
      lastCount = count;
      lastProgress = Date.now();
    }
    await new Promise((res) => setTimeout(res, 100));
  }
  const drainMs = Date.now() - loadEnded;
  const mine = measured();
  const processing = mine.filter((x) => x.event === 'pix.payout.processing' && x.transactionId && answeredAt.has(x.transactionId));
  const confirmed = mine.filter((x) => x.event === 'pix.payout.confirmed' && x.settledAt);
  const delays = (xs: number[]) => xs.sort((a, b) => a - b);
  const dProcessing = delays(processing.map((x) => Math.max(0, x.at - answeredAt.get(x.transactionId!)!)));
  const dConfirmed = delays(confirmed.map((x) => Math.max(0, x.at - Date.parse(x.settledAt!))));
  const last = Math.max(...mine.map((x) => x.at), started);
  report(workers, 'webhooks', 'cash-out, 10 accounts each with a webhook (processing + confirmed)', r, 'tpcb');
  console.log(
    [
      `  drained       ${mine.length === 2 * answeredAt.size ? `all delivered ${(drainMs / 1000).toFixed(1)} s after the load stopped` : `NOT all delivered: ${2 * answeredAt.size - mine.length} missing 30 s after the last receipt`}`,
      `  deliveries    ${mine.length} received of ${2 * answeredAt.size} expected (${processing.length} processing, ${confirmed.length} confirmed), ${(mine.length / ((last - started) / 1000)).toFixed(0)}/s`,
      `  processing    answer -> receipt   p50 ${ms(percentile(dProcessing, 50))}   p99 ${ms(percentile(dProcessing, 99))}`,
      `  confirmed     settled_at -> receipt  p50 ${ms(percentile(dConfirmed, 50))}   p99 ${ms(percentile(dConfirmed, 99))}`,
    ].join('\n'),
  );
  summary.push({ workers, scenario: 'webhook deliveries/s (p99 state change -> receipt, processing)', throughput: mine.length / ((last - started) / 1000), p99: percentile(dProcessing, 99), versus: null });
}
