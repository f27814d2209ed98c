import { Agent, setGlobalDispatcher } from 'undici';
import pg from 'pg';
import { createTestSchema } from './helpers/db.js';
import { describe, expect, it } from 'vitest';
import { ApiClient } from './helpers/client.js';
import { validCnpj, validCpf } from './helpers/fixtures.js';
import { startPixgate } from './helpers/process.js';

/**
 * WEB_CONCURRENCY=2: one worker runs the background loops that batch across the cluster (the rail
 * simulator's engine, the webhook dispatcher, the PIX recovery); the other sends it its
 * wake-ups through the primary (src/lib/clusterWakes.ts). A cash-out served by either worker is
 * settled when due and its events fanned out at once — not at the loops' safety nets (5 s for the
 * engine, 10 s for the dispatcher), which is all a worker's own work would get if its wake-ups were
 * lost. Each cash-out goes on a new connection, which the primary hands to the workers in turn.
 */
const ADMIN_TOKEN = 'cluster-background-admin-token';
const pgUrl = process.env.TEST_DATABASE_URL;
const redisUrl = process.env.TEST_REDIS_URL;

describe.runIf(pgUrl && redisUrl)('one background worker per cluster (WEB_CONCURRENCY=2)', () => {
  it('cash-outs served by each worker are settled and fanned out promptly, also after the background worker was killed', async () => {
    // A connection per request: no keep-alive to pin the requests to one worker.
    setGlobalDispatcher(new Agent({ keepAliveTimeout: 1, keepAliveMaxTimeout: 1, pipelining: 0 }));
    const schema = `cluster_${Date.now().toString(36)}`;
    const c = new pg.Client({ connectionString: pgUrl, options: `-c search_path=${schema}` });
    await c.connect();
    const access = await createTestSchema(schema);
    const p = await startPixgate({ ...access.env(), REDIS_URL: redisUrl!, WEB_CONCURRENCY: '2', ADMIN_TOKEN, SIM_SETTLEMENT_MS: '200', RATE_LIMIT_PER_MINUTE: '100000' });
    try {
      await p.waitFor(/pixgate listening[\s\S]*pixgate listening/);
      const call = async (prefix: string, method: string, path: string, body?: unknown) => {
        const res = await fetch(`${p.url}/api/${prefix}${path}`, {
          method,
          headers: { authorization: `Bearer ${ADMIN_TOKEN}`, 'content-type': 'application/json' },
          body: body === undefined ? undefined : JSON.stringify(body),
        });
        return { status: res.status, body: (await res.json()) as any };
      };
      const m = await call('admin', 'POST', '/merchants', { name: 'Cluster Payer', document: validCnpj() });
      expect((await call('admin', 'POST', `/accounts/${m.body.account_id}/deposits`, { amount: 1_000_000 })).status).toBe(201);
      const k = await call('admin', 'POST', '/api-keys', { merchant_id: m.body.merchant_id, permissions: ['transfer:write', 'transfer:read'], ip_whitelist: ['127.0.0.1', '::1'] });
      const key = 'cluster-receiver@example.com';
      expect((await call('sandbox', 'POST', '/dict/keys', { key, type: 'email', name: 'Recebedora', document: validCpf(), ispb: '60746948' })).status).toBe(201);
      const client = new ApiClient(p.url!, k.body.client_id, k.body.client_secret);

      // Six cash-outs, each settled and fanned out before the next; the slowest wait is returned.
      const cashOuts = async (first: number) => {
        const waits: number[] = [];
        for (let i = first; i < first + 6; i++) {
          const res = await client.post('/pix/cash-out', { amount: 100 + i, pix_key: key });
          expect(res.status).toBe(200);
          const answered = Date.now();
          for (;;) {
            const [row] = (
              await c.query(
                `SELECT t.stage, (SELECT count(*) FROM outbox_pending q WHERE q.subject = t.transaction_id)::int AS waiting
                   FROM transactions t WHERE t.transaction_id = $1`,
                [res.body.transaction_id],
              )
            ).rows;
            if (row.stage === 3 && row.waiting === 0) break;
            if (Date.now() - answered > 4000) throw new Error(`cash-out ${i} not settled and fanned out within 4 s: ${JSON.stringify(row)}`);
            await new Promise((r) => setTimeout(r, 25));
          }
          waits.push(Date.now() - answered);
        }
        return Math.max(...waits);
      };
      // 200 ms of settlement plus the engine's 20 ms steps and the fan-out; a lost wake-up waits for
      // a safety net of 5 s or more.
      expect(await cashOuts(0)).toBeLessThan(2500);

      // The background worker killed: the primary forks its successor with the role, and the
      // cash-outs after that are settled as promptly.
      const roles = () => [...p.output().matchAll(/"pid":(\d+)[^\n]*"background_loops":(true|false)/g)].map((m) => ({ pid: Number(m[1]), loops: m[2] === 'true' }));
      expect(roles().map((r) => r.loops).sort()).toEqual([false, true]);
      const first = roles().find((r) => r.loops)!;
      process.kill(first.pid, 'SIGKILL');
      const deadline = Date.now() + 20_000;
      while (!roles().some((r) => r.loops && r.pid !== first.pid)) {
        if (Date.now() > deadline) throw new Error(`no successor ran the background loops:\n${p.output()}`);
        await new Promise((r) => setTimeout(r, 50));
      }
      await p.waitFor(/worker died; starting another[\s\S]*pixgate listening/);
      expect(await cashOuts(6)).toBeLessThan(2500);
      expect(p.output()).not.toMatch(/failed to start/);
    } finally {
      p.proc.kill('SIGTERM');
      expect((await p.exited).code).toBe(0);
      await access.drop();
      await c.end();
    }
  }, 60_000);
});
