import { randomBytes, randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BACKENDS } from '../helpers/db.js';
import { merchantWithKey, type MerchantFixture } from '../helpers/client.js';
import { foreignKey, SIM_FAST } from '../helpers/pix.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

/**
 * Issue 10, defect 4: one route spelled three ways (`cash-out`, `cash%2Dout`, `%63ash-out`) is one
 * route: the idempotency scope is the route that runs, and signature v2 covers one defined form of
 * the path (percent-encoding normalised), so one key makes one payout.
 */
const SPELLINGS = ['/pix/cash-out', '/pix/cash%2Dout', '/pix/%63ash-out'];

describe.each(BACKENDS)('one Idempotency-Key, one payout, however the path is spelled, on %s', (backend) => {
  let s: TestServer;
  let receiver: string;
  beforeAll(async () => {
    s = await startTestServer({ backend, env: SIM_FAST });
    receiver = await foreignKey(s);
  });
  afterAll(async () => s?.close());

  const payouts = async (m: MerchantFixture) =>
    (await s.ctx.db.query<{ n: number }>(`SELECT count(*)::bigint AS n FROM transactions WHERE account_id = $1 AND kind = 'cash_out'`, [m.accountId]))[0]!.n;

  it('the three spellings with one key and body: one payout, the 2nd and 3rd are replays of the first answer', async () => {
    const m = await merchantWithKey(s, { depositCents: 100_000 });
    const key = `idem-${randomUUID()}`;
    const answers = [];
    for (const path of SPELLINGS) answers.push(await m.client.post(path, { amount: 1000, pix_key: receiver }, { idempotencyKey: key }));
    expect(answers.map((a) => a.status)).toEqual([200, 200, 200]);
    expect(answers.map((a) => a.headers.get('x-idempotent-replay'))).toEqual([null, 'true', 'true']);
    expect(answers[1]!.text).toBe(answers[0]!.text);
    expect(answers[2]!.text).toBe(answers[0]!.text);
    expect(await payouts(m)).toBe(1);
  });

  it('signature v2 covers the normalised path: signed as /api/external/pix/cash-out, sent as any spelling, verified; one payout', async () => {
    const m = await merchantWithKey(s, { depositCents: 100_000 });
    const key = `idem-${randomUUID()}`;
    const text = JSON.stringify({ amount: 500, pix_key: receiver });
    const statuses = [];
    for (const path of SPELLINGS) {
      const headers = m.client.signatureHeaders('POST', '/pix/cash-out', text, { sign: 'v2', idempotencyKey: key, nonce: randomBytes(16).toString('hex') });
      const res = await fetch(`${s.url}/api/external${path}`, {
        method: 'POST',
        headers: { authorization: m.client.authHeader(), 'content-type': 'application/json', ...headers },
        body: text,
      });
      statuses.push([res.status, res.headers.get('x-idempotent-replay')]);
    }
    expect(statuses).toEqual([
      [200, null],
      [200, 'true'],
      [200, 'true'],
    ]);
    expect(await payouts(m)).toBe(1);
  });

  it('signature v2 over a non-normalised spelling of the path is not the signed form: 401', async () => {
    const m = await merchantWithKey(s, { depositCents: 100_000 });
    const res = await m.client.post('/pix/%63ash-out', { amount: 500, pix_key: receiver }, { sign: 'v2' });
    expect(res.status).toBe(401);
    expect(await payouts(m)).toBe(0);
  });
});
