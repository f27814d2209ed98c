import { createServer } from 'node:net';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BACKENDS, createTestSchema } from './helpers/db.js';
import { startPixgate } from './helpers/process.js';
import { startTestServer, type TestServer } from './helpers/server.js';

/** pixgate_db_statements_total by source, read from GET /metrics. */
async function statements(s: TestServer): Promise<Record<string, number>> {
  const res = await fetch(`${s.url}/metrics`, { headers: { authorization: `Bearer ${s.ctx.config.adminToken}` } });
  return parseStatements(await res.text());
}

function parseStatements(text: string): Record<string, number> {
  const out: Record<string, number> = {};
  for (const m of text.matchAll(/^pixgate_db_statements_total\{pool="([a-z_]+)"\} (\d+)/gm)) out[m[1]!] = Number(m[2]);
  return out;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * An idle server sends at most 5 statements a second (issue 12): its workers sleep until woken or
 * until a deadline they read, with slow safety-net polls (docs/decisions.md, "Idle: wake-ups
 * instead of polling"). Measured with the statement counter of the db layer over 3 s, after the
 * start-up ticks: everything the process sends (request, background, listen — the two /metrics
 * scrapes' own backlog reads included — and the simulated rail's engine, whose safety net polls
 * every 5 s on the system clock).
 */
describe.each(BACKENDS)('an idle server on %s', (backend) => {
  let s: TestServer;
  beforeAll(async () => {
    s = await startTestServer({ backend });
  });
  afterAll(async () => s?.close());

  it('sends at most 5 statements a second (counted, the simulated rail included)', async () => {
    await sleep(1_500); // start-up: every worker looks once, then sleeps
    const before = await statements(s);
    await sleep(3_000);
    const after = await statements(s);
    const delta = Object.fromEntries(Object.keys(after).map((k) => [k, after[k]! - (before[k] ?? 0)]));
    const all = Object.values(delta).reduce((n, v) => n + v, 0);
    expect(after.background, 'the counter counts the workers').toBeGreaterThan(0);
    expect(after.rail, 'the counter counts the rail').toBeGreaterThan(0);
    expect(all, `statements in 3 s by source: ${JSON.stringify(delta)}`).toBeLessThanOrEqual(15);
  });

  it('counts every statement of a transaction, BEGIN and COMMIT included', async () => {
    const db = s.ctx.db.counted('test_probe');
    await db.query('SELECT 1');
    await db.transaction(async (tx) => {
      await tx.query('SELECT 1');
      await tx.query('SELECT 2');
    });
    await db.transaction(async () => undefined).catch(() => undefined);
    await expect(db.transaction(async () => Promise.reject(new Error('rolled back')))).rejects.toThrow('rolled back');
    // 1 + (BEGIN, 2, COMMIT) + (BEGIN, COMMIT) + (BEGIN, ROLLBACK)
    expect(s.ctx.db.statements().test_probe).toBe(9);
    expect((await statements(s)).test_probe).toBe(9);
  });
});

const pgUrl = process.env.TEST_DATABASE_URL;
const redisUrl = process.env.TEST_REDIS_URL;

describe.runIf(pgUrl && redisUrl)('an idle pixgate process with WEB_CONCURRENCY=2 on PostgreSQL', () => {
  it('sends at most 5 statements a second over both workers, the simulated rail included (summed by the primary on METRICS_PORT)', async () => {
    const schema = `idle_${Date.now().toString(36)}`;
    const c = new pg.Client({ connectionString: pgUrl });
    await c.connect();
    const access = await createTestSchema(schema);
    const port = await new Promise<number>((resolve) => {
      const probe = createServer().listen(0, '127.0.0.1', () => {
        const p = (probe.address() as { port: number }).port;
        probe.close(() => resolve(p));
      });
    });
    const p = await startPixgate({ ...access.env(), REDIS_URL: redisUrl!, WEB_CONCURRENCY: '2', ADMIN_TOKEN: 'idle-test-admin-token-0123456789', METRICS_PORT: String(port) });
    try {
      await p.waitFor(/pixgate listening[\s\S]*pixgate listening/);
      await sleep(1_500);
      const read = async () => parseStatements(await (await fetch(`http://127.0.0.1:${port}/metrics`)).text());
      const before = await read();
      await sleep(3_000);
      const after = await read();
      const delta = Object.fromEntries(Object.keys(after).map((k) => [k, after[k]! - (before[k] ?? 0)]));
      const all = Object.values(delta).reduce((n, v) => n + v, 0);
      expect(after.background, 'both workers report their counts').toBeGreaterThan(0);
      expect(all, `statements in 3 s by source: ${JSON.stringify(delta)}`).toBeLessThanOrEqual(15);
    } finally {
      p.proc.kill('SIGTERM');
      await p.exited;
      await access.drop();
      await c.end();
    }
  });
});
