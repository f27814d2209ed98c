/**
 * `npm run ha -- --bench` (bench/ha.ts): cash-out throughput on the lab of ./lab.ts, synchronously
 * replicated, as a ratio to pgbench against the same primary.
 */
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import pg from 'pg';
import { validCnpj, validCpf } from '../../test/helpers/fixtures.js';
import { Merchant, Operator } from '../chaos/client.js';
import { postgresBin } from '../chaos/infra.js';
import { WebhookReceiver } from '../chaos/receiver.js';
import { prng } from '../chaos/workload.js';
import { Lab, tearDownOnSignal } from './lab.js';
import { HA_DEFAULTS, type HaOptions } from './run.js';

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
