import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BACKENDS } from './helpers/db.js';
import { startTestServer, type TestServer } from './helpers/server.js';

/** pixgate_db_statements_total by source, read from GET /metrics. */
async function statements(s: TestServer): Promise<Record<string, number>> {
  const res = await fetch(`${s.url}/metrics`, { headers: { authorization: `Bearer ${s.ctx.config.adminToken}` } });
  const text = await res.text();
  const out: Record<string, number> = {};
  for (const m of text.matchAll(/^pixgate_db_statements_total\{pool="([a-z_]+)"\} (\d+)/gm)) out[m[1]!] = Number(m[2]);
  return out;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * An idle server sends at most 5 statements a second (issue 12): its workers sleep until woken or
 * until a deadline they read, with slow safety-net polls (docs/decisions.md, "Idle: wake-ups
 * instead of polling"). Measured with the statement counter of the db layer over 3 s, after the
 * start-up ticks: everything pixgate sends (request, background, listen — the two /metrics
 * scrapes' own backlog reads included), not the simulated rail (`rail`: it stands in for the
 * bank's systems and its engine has its own loop, made to wake on NOTIFY by another change).
 */
describe.each(BACKENDS)('an idle server on %s', (backend) => {
  let s: TestServer;
  beforeAll(async () => {
    s = await startTestServer({ backend });
  });
  afterAll(async () => s?.close());

  it('sends at most 5 statements a second (counted, the simulated rail apart)', async () => {
    await sleep(1_500); // start-up: every worker looks once, then sleeps
    const before = await statements(s);
    await sleep(3_000);
    const after = await statements(s);
    const delta = Object.fromEntries(Object.keys(after).map((k) => [k, after[k]! - (before[k] ?? 0)]));
    const own = Object.entries(delta).filter(([k]) => k !== 'rail').reduce((n, [, v]) => n + v, 0);
    expect(after.background, 'the counter counts the workers').toBeGreaterThan(0);
    expect(own, `statements in 3 s by source: ${JSON.stringify(delta)}`).toBeLessThanOrEqual(15);
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
