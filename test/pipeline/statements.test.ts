import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BalanceReader } from '../../src/external/balanceReader.js';
import { merchantWithKey, type MerchantFixture } from '../helpers/client.js';
import { BACKENDS } from '../helpers/db.js';
import { countingRedis, recordStatements, summarize } from '../helpers/statements.js';
import { openTestRedis } from '../helpers/redis.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

/**
 * What one request of the pipeline costs the database (and Redis), counted by wrapping the
 * server's Database: the figures of issue 12 kept as assertions so they cannot creep back up.
 * Background workers are off, so every statement counted is the request's own.
 */
describe.each(BACKENDS)('statements per request on %s', (backend) => {
  let s: TestServer;
  let m: MerchantFixture;
  let recorder: ReturnType<typeof recordStatements>;
  let redisCalls: string[] | undefined;
  let closeRedis = async () => {};

  beforeAll(async () => {
    let redis;
    if (process.env.TEST_REDIS_URL) {
      const r = await openTestRedis();
      closeRedis = r.close;
      const c = countingRedis(r.redis);
      redis = c.redis;
      redisCalls = c.calls;
    }
    s = await startTestServer({ backend, workers: false, ...(redis ? { redis } : {}) });
    recorder = recordStatements(s.ctx.db);
    m = await merchantWithKey(s, { depositCents: 1_000 });
  });
  afterAll(async () => {
    recorder?.stop();
    await s?.close();
    await closeRedis();
  });

  /** What the database was sent since the last call: statements (BEGIN/COMMIT apart) and transactions. */
  function taken() {
    const log = recorder.take();
    const statements = log.filter((x) => x.text !== 'BEGIN' && x.text !== 'COMMIT').map((x) => x.text.replace(/\s+/g, ' ').trim());
    return { statements, transactions: summarize(log).transactions };
  }

  /** Runs `send` once to warm the caches, then once counted; returns what the second one cost. */
  async function cost(send: () => Promise<{ status: number }>, expectedStatus = 200) {
    expect((await send()).status).toBe(expectedStatus);
    recorder.take();
    if (redisCalls) redisCalls.length = 0;
    expect((await send()).status).toBe(expectedStatus);
    return { ...taken(), redis: redisCalls ? [...redisCalls] : undefined };
  }

  it('GET /balance: one statement (the balance); authentication comes from the in-process cache; no Redis', async () => {
    const c = await cost(() => m.client.get('/balance'));
    expect(c.statements, c.statements.join('\n')).toHaveLength(1);
    expect(c.statements[0]).toMatch(/FROM ledger_accounts/);
    expect(c.transactions).toBe(0);
    if (c.redis) expect(c.redis).toEqual([]);
  });

  it('signed POST /cpf/validate (v1): no statement at all; one Redis command (the rate-limit script)', async () => {
    const c = await cost(() => m.client.post('/cpf/validate', { cpf: '529.982.247-25' }));
    expect(c.statements, c.statements.join('\n')).toEqual([]);
    expect(c.transactions).toBe(0);
    if (c.redis) expect(c.redis).toEqual(['evalsha']);
  });

  it('signed POST /cpf/validate (v2 + Idempotency-Key): three statements (nonce record, claim, answer); one Redis command (nonce claim and rate limit in one script)', async () => {
    const c = await cost(() => m.client.post('/cpf/validate', { cpf: '529.982.247-25' }, { sign: 'v2' }));
    expect(c.statements, c.statements.join('\n')).toHaveLength(3);
    // The nonce is recorded durably (issue 25): group-committed, like the claim and the answer.
    expect(c.statements[0]).toMatch(/^WITH relaxed_commit AS .* INSERT INTO request_nonces/);
    expect(c.statements[1]).toMatch(/^INSERT INTO idempotency_keys/);
    // The answer completes its key and is stored beside it, day-partitioned (migration 0910), in one statement.
    expect(c.statements[2]).toMatch(/^WITH done AS \( ?UPDATE idempotency_keys k SET status = 'completed'.* INSERT INTO idempotency_responses/);
    expect(c.transactions).toBe(0);
    if (c.redis) expect(c.redis).toEqual(['evalsha']);
  });

  it('GET /balance reads of one event-loop turn share one statement, each answered with its own account', async () => {
    const other = await merchantWithKey(s, { depositCents: 2_000 });
    const reader = new BalanceReader(s.ctx.db);
    recorder.take();
    const [a1, b1, a2] = await Promise.all([reader.read(m.accountId), reader.read(other.accountId), reader.read(m.accountId)]);
    const { statements } = taken();
    expect(statements, statements.join('\n')).toHaveLength(1);
    expect(a1.available).toBe(100_000);
    expect(a2).toEqual(a1);
    expect(b1.available).toBe(200_000);
    const camel = await m.client.get('/balance', { camelCase: true });
    expect(camel.body).toEqual({
      worked: true,
      accountId: m.accountId,
      currency: 'BRL',
      available: 100_000,
      blocked: 0,
      pending: 0,
      ledgerTotal: 100_000,
      safe: 100_000,
      asOf: expect.stringMatching(/Z$/),
    });
  });

  it('a refused request costs no more than an accepted one: wrong secret of a cached key, one statement at most', async () => {
    const { ApiClient } = await import('../helpers/client.js');
    const wrong = new ApiClient(s.url, m.client.clientId, 'sk_wrong');
    const c = await cost(() => wrong.get('/balance'), 401);
    expect(c.statements.length, c.statements.join('\n')).toBeLessThanOrEqual(1);
  });
});
