import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { recoverUnsent } from '../../src/pix/recovery.js';
import type { SimulatedRail } from '../../src/rail/sim/simulatedRail.js';
import { BACKENDS } from '../helpers/db.js';
import { merchantWithKey, type MerchantFixture } from '../helpers/client.js';
import { expectLedgerConsistent, foreignKey, sandbox, txRow, waitFor } from '../helpers/pix.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

/**
 * Issue 25 (HA run: a cash-out stuck at stage 2 with no payment at the rail). The rail acknowledged
 * an order, pixgate recorded the acknowledgement (stage 2), and then a failover lost the rail's
 * record of it (acknowledged by a primary that was no longer the primary, or read there before its
 * standby had it). Nothing would ever settle it: recovery sent only stage-1 records again. Now a
 * record at stage 2 whose order the rail does not know is sent again after a bounded time (the rail
 * deduplicates by end-to-end id, so an order it knows is only acknowledged again).
 *
 * The loss is simulated by deleting the simulator's row. Settlement is slow here (the orders stay
 * in flight at the rail) so that the records stay at stage 2 until the test settles them.
 */
describe.each(BACKENDS)('an order the rail acknowledged and then lost is sent again, on %s', (backend) => {
  let s: TestServer;
  let m: MerchantFixture;
  beforeAll(async () => {
    s = await startTestServer({ backend, env: { SIM_SETTLEMENT_MS: '600000', SIM_PROTECTION_MS: '600000', SIM_SEED: '7' } });
    m = await merchantWithKey(s, { depositCents: 100_000 });
  });
  afterAll(async () => {
    await expectLedgerConsistent(s.ctx.db);
    await s?.close();
  });

  const sim = () => s.ctx.rail as unknown as SimulatedRail;
  const railKnows = async (endToEndId: string) => (await s.ctx.db.query('SELECT 1 FROM sim_payments WHERE end_to_end_id = $1', [endToEndId])).length === 1;
  /** The failover: the rail's record of the order is gone; pixgate's (stage 2) survived. */
  const loseAtRail = async (endToEndId: string) => {
    await s.ctx.db.query('DELETE FROM sim_notifications WHERE subject = $1', [endToEndId]);
    // A return's row and what it took from its original were written in one transaction: lost together.
    await s.ctx.db.query(
      `WITH r AS (DELETE FROM sim_payments WHERE end_to_end_id = $1 RETURNING kind, original_end_to_end_id, amount, behavior)
       UPDATE sim_payments o SET returned_amount = o.returned_amount - r.amount FROM r
        WHERE r.kind = 'return' AND r.behavior = 'settle' AND o.end_to_end_id = r.original_end_to_end_id`,
      [endToEndId],
    );
  };
  /** The rail's settlement time comes: due now, and one pass of its engine. */
  const settleAtRail = async (endToEndId: string) => {
    await s.ctx.db.query(`UPDATE sim_payments SET due_at = now() - interval '1 second' WHERE end_to_end_id = $1`, [endToEndId]);
    await sim().tick();
  };
  const ledgerCount = async (reference: string, kind: string) => {
    const [row] = await s.ctx.db.query<{ n: number }>('SELECT count(*)::int AS n FROM ledger_transactions WHERE reference = $1 AND kind = $2', [reference, kind]);
    return row!.n;
  };

  it('a cash-out at stage 2 that the rail lost is sent again and settles once', async () => {
    const res = await m.client.post('/pix/cash-out', { amount: 700, pix_key: await foreignKey(s) });
    expect(res.status).toBe(200);
    const { transaction_id: id, end_to_end_id: e2e } = res.body;
    expect((await txRow(s.ctx.db, id)).stage).toBe(2);
    await loseAtRail(e2e);

    // A pass of the recovery before the bound leaves it alone; past it, the order goes out again.
    await recoverUnsent(s.ctx, { olderThanMs: 0 });
    expect(await railKnows(e2e)).toBe(false);
    await recoverUnsent(s.ctx, { olderThanMs: 0, reconcileAfterMs: 0 });
    expect(await railKnows(e2e)).toBe(true);
    // Known now: a later pass sends it again, which the rail only acknowledges (one payment).
    await recoverUnsent(s.ctx, { olderThanMs: 0, reconcileAfterMs: 0 });
    expect((await s.ctx.db.query('SELECT 1 FROM sim_payments WHERE transaction_id = $1', [id])).length).toBe(1);

    await settleAtRail(e2e);
    const row = await waitFor(() => txRow(s.ctx.db, id), (r) => r.stage === 3);
    expect(row.payment_status).toBe('settled');
    expect(await ledgerCount(id, 'cash_out_reserve')).toBe(1);
    expect(await ledgerCount(id, 'cash_out_settle')).toBe(1);
  });

  it('a refund at stage 2 that the rail lost is sent again and settles once', async () => {
    const inbound = await sandbox(s, 'POST', '/pix/inbound', { account_id: m.accountId, amount: 5000, payer_name: 'Carlos Pagador', payer_document: '52998224725', payer_ispb: '60746948' });
    expect(inbound.status).toBe(201);
    const res = await m.client.post('/pix/refund', { original_transaction_id: inbound.body.transaction_id, amount: 2000 });
    expect(res.status).toBe(202);
    const { transaction_id: id } = res.body;
    const refund = await txRow(s.ctx.db, id);
    expect(refund.stage).toBe(2);
    await loseAtRail(refund.end_to_end_id);

    await recoverUnsent(s.ctx, { olderThanMs: 0, reconcileAfterMs: 0 });
    expect(await railKnows(refund.end_to_end_id)).toBe(true);
    await settleAtRail(refund.end_to_end_id);
    const row = await waitFor(() => txRow(s.ctx.db, id), (r) => r.stage === 3);
    expect(row.payment_status).toBe('settled');
    const [original] = await s.ctx.db.query<{ returned_amount: number }>('SELECT returned_amount::int AS returned_amount FROM sim_payments WHERE end_to_end_id = $1', [inbound.body.end_to_end_id]);
    expect(original!.returned_amount).toBe(200_000);
  });
});
