import { randomBytes } from 'node:crypto';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import * as store from '../../src/rail/sim/store.js';
import { BACKENDS, openTestDatabase, type TestDatabase } from '../helpers/db.js';

/**
 * Issue 25 (HA run, 20 failovers: a cash-out protection had queued got payment.settled delivered
 * before payment.accepted, so it never announced pix.payout.processing). The engine's settlement
 * statement leases a settlement notification at once when no other notification of its subject
 * waits — but the payment.accepted of a payment protection held can commit after the statement's
 * snapshot (the payment row it locks is re-read in its new version, the queue is not). Such a
 * settlement is left to the claim, which delivers a subject's notifications in order.
 */
describe.each(BACKENDS)('the settlement of a payment protection held, on %s', (backend) => {
  let t: TestDatabase;
  beforeEach(async () => {
    t = await openTestDatabase(backend);
  });
  afterEach(async () => t?.close());

  const take = async (fraudFlagged: boolean) => {
    const key = `k-${randomBytes(4).toString('hex')}@example.com`;
    await t.db.query(`INSERT INTO sim_dict_entries (key, type, name, document, ispb, behavior, fraud_flagged) VALUES ($1, 'email', 'N', '52998224725', '60746948', 'settle', $2)`, [key, fraudFlagged]);
    const e2e = `E${randomBytes(12).toString('hex')}`;
    const now = new Date(Date.now() - 60_000);
    await store.takeOutboundPayments(
      t.db,
      [{ end_to_end_id: e2e, transaction_id: `T${randomBytes(8).toString('hex')}`, amount: 100, payer_name: 'P', payer_document: '1', payer_ispb: '99999999', payer_account_id: 1, receiver_key: key, description: null, txid: null }],
      { created_at: now, protectionDue: now, settlementDue: now, institutionIspb: '99999999', refusals: { keyNotFound: 'AC01', sameInstitution: 'AC02' } },
    );
    // Protection over (its payment.accepted delivered and gone, or not visible yet): in flight, due.
    await t.db.query(`UPDATE sim_payments SET status = 'in_flight', due_at = $2 WHERE end_to_end_id = $1`, [e2e, now]);
    return e2e;
  };

  it('is never leased at once (the claim delivers it in order); another settlement alone of its subject is', async () => {
    const held = await take(true);
    const plain = await take(false);
    const result = await store.settleDuePayments(t.db, new Date(), 10, new Date(Date.now() + 30_000));
    expect(result.settled).toBe(2);
    expect(result.leased.map((n) => n.subject)).toEqual([plain]);
    expect(result.unleased).toBe(1);
    const claimed = await store.claimNotifications(t.db, new Date(), new Date(Date.now() + 30_000), 10);
    expect(claimed.map((n) => n.notification_id)).toEqual([`payment.settled:${held}`]);
  });
});
