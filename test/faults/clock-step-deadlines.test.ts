import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { merchantWithKey, type MerchantFixture } from '../helpers/client.js';
import { BACKENDS } from '../helpers/db.js';
import { expectLedgerConsistent, foreignKey, txRow, waitFor } from '../helpers/pix.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

/**
 * Issue 24, item 16, persisted deadlines: the fault-injection suite stepped the wall clock 2 h
 * forward and back, and the rail simulator's due times and delivery leases written during the
 * forward step lay 2 h in the future afterwards — payouts stayed processing, MED refunds at stage
 * 2, notifications leased, until the wall clock caught up. The engine now sees the step back and
 * makes what lies beyond its longest legitimate wait due at once.
 */
const TWO_HOURS = 2 * 3600_000;
let shift = 0;
const clock = { now: () => new Date(Date.now() + shift) };

describe.each(BACKENDS)('deadlines written before a backward wall-clock step, %s', (backend) => {
  let s: TestServer;
  let m: MerchantFixture;
  beforeAll(async () => {
    shift = 0;
    s = await startTestServer({ backend, clock, env: { SIM_SETTLEMENT_MS: '1500', SIM_PROTECTION_MS: '1500', SIM_SEED: '7' } });
    m = await merchantWithKey(s, { depositCents: 1_000_000 });
  });
  afterAll(async () => {
    shift = 0;
    await expectLedgerConsistent(s.ctx.db);
    await s?.close();
  });

  it('a payout accepted 2 h ahead settles soon after the clock steps back, not 2 h later', async () => {
    const key = await foreignKey(s);
    shift = TWO_HOURS;
    const res = await m.client.post('/pix/cash-out', { amount: 1000, pix_key: key });
    expect(res.status).toBe(200);
    const id = res.body.transaction_id as string;
    const [payment] = await s.ctx.db.query<{ due_at: Date }>(
      `SELECT p.due_at FROM sim_payments p JOIN transactions t ON t.end_to_end_id = p.end_to_end_id WHERE t.transaction_id = $1`,
      [id],
    );
    expect(payment!.due_at.getTime()).toBeGreaterThan(Date.now() + TWO_HOURS - 60_000); // written on the stepped clock
    shift = 0; // the step back (NTP)
    const row = await waitFor(() => txRow(s.ctx.db, id), (r) => r.stage === 3, 20_000);
    expect(row.payment_status).toBe('settled');
  });
});
