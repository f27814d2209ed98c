import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SimDirectory } from '../../src/rail/sim/directory.js';
import { BACKENDS } from '../helpers/db.js';
import { merchantWithKey, type MerchantFixture } from '../helpers/client.js';
import { balances, foreignKey, SIM_FAST } from '../helpers/pix.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

/**
 * Issue 25 (HA run: a cash-out answered 500 while the database failed over). The rail's key
 * look-up did not answer within RAIL_TIMEOUT_MS — the simulated bank's database was failing over —
 * and the RailTimeoutError reached the edge as an internal error. Nothing was done (no reservation,
 * no order): the answer is the unavailability's 503 with Retry-After, and a retry succeeds.
 */
describe.each(BACKENDS)('a rail call that does not answer in time, on %s', (backend) => {
  let s: TestServer;
  let m: MerchantFixture;
  beforeAll(async () => {
    s = await startTestServer({ backend, env: { ...SIM_FAST, RAIL_TIMEOUT_MS: '300' } });
    m = await merchantWithKey(s, { depositCents: 100_000 });
  });
  afterAll(async () => s?.close());

  it('answers 503 with Retry-After (not 500) when the key look-up times out, and the retry goes through', async () => {
    const key = await foreignKey(s);
    const before = await balances(s.ctx.db, m.accountId);
    // The simulator's directory look-up hangs (behind the deadline of withDeadline, which wraps
    // the adapter's directory: the simulator's own method is the one to replace).
    const own = SimDirectory.prototype.lookupKey;
    SimDirectory.prototype.lookupKey = () => new Promise(() => {});
    let res;
    try {
      res = await m.client.post('/pix/cash-out', { amount: 500, pix_key: key }, { idempotencyKey: `rail-timeout-${backend}` });
    } finally {
      SimDirectory.prototype.lookupKey = own;
    }
    expect(res.status).toBe(503);
    expect(res.headers.get('retry-after')).toBe('5');
    expect(Object.keys(res.body.errors ?? {})).toEqual(['service_unavailable']);
    expect(await balances(s.ctx.db, m.accountId)).toEqual(before);

    const again = await m.client.post('/pix/cash-out', { amount: 500, pix_key: key }, { idempotencyKey: `rail-timeout-${backend}` });
    expect(again.status).toBe(200);
  });
});
