import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { constraintName, sqlState, type Sql } from '../../src/db/db.js';
import { INSTITUTION_BOOK, post } from '../../src/ledger/ledger.js';
import { newEndToEndId } from '../../src/lib/ids.js';
import { MAX_BALANCE_BASE_UNITS } from '../../src/lib/money.js';
import { railNotificationHandler } from '../../src/pix/railEvents.js';
import { SimulatedRail } from '../../src/rail/sim/simulatedRail.js';
import * as simStore from '../../src/rail/sim/store.js';
import { addPixKey, merchantWithKey, type MerchantFixture } from '../helpers/client.js';
import { BACKENDS } from '../helpers/db.js';
import { balances, expectLedgerConsistent, foreignKey, outbox, SIM_FAST, sandbox, txRow, waitFor } from '../helpers/pix.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

/**
 * Issue 24, items 6–8: what the rail reports is checked before money moves (a return of a payout
 * that did not settle, or beyond what it settled, is refused and recorded, never credited, never
 * retried), the database refuses what no code path may write, and a credit that would take an
 * account past MAX_BALANCE_BASE_UNITS is refused back to the payer instead of failing forever.
 */

class Rollback extends Error {}

/** The error a statement raises, in a transaction that is rolled back in any case. */
async function refusal(sql: { transaction<T>(fn: (tx: Sql) => Promise<T>): Promise<T> }, statement: string, params: unknown[] = []): Promise<{ state?: string; constraint?: string }> {
  try {
    await sql.transaction(async (tx) => {
      await tx.query(statement, params);
      throw new Rollback();
    });
  } catch (err) {
    if (err instanceof Rollback) return {};
    return { state: sqlState(err), constraint: constraintName(err) };
  }
  return {};
}

describe.each(BACKENDS)('ledger backstops on %s', (backend) => {
  let s: TestServer;
  let sim: SimulatedRail;
  beforeAll(async () => {
    s = await startTestServer({ backend, env: SIM_FAST });
    sim = s.ctx.rail as SimulatedRail;
  });
  afterAll(async () => {
    if (s) await expectLedgerConsistent(s.ctx.db);
    await s?.close();
  });

  /** Credits an account with a bulk amount straight through the ledger (beyond what one API call may move). */
  const bulkCredit = (accountId: number, amount: number) =>
    s.ctx.db.transaction((tx) =>
      post(tx, {
        kind: 'deposit',
        reference: `bulk-${randomUUID()}`,
        postings: [
          { book: INSTITUTION_BOOK.funding, amount: -amount },
          { book: { accountId, book: 'available' }, amount },
        ],
      }),
    );

  const cashOut = async (m: MerchantFixture, key: string, amount = 1000) => {
    const res = await m.client.post('/pix/cash-out', { amount, pix_key: key });
    expect([200, 202]).toContain(res.status);
    return res.body as { transaction_id: string; end_to_end_id: string };
  };
  const finished = (id: string) => waitFor(() => txRow(s.ctx.db, id), (r) => r.stage === 3);

  /** A `payment.returned` as a misbehaving rail would send it, delivered through the simulator's engine. */
  const deliverReturn = async (endToEndId: string, amount: number) => {
    const returnEndToEndId = newEndToEndId('D', '18236120', new Date());
    const notificationId = `payment.returned:${returnEndToEndId}`;
    const now = new Date();
    await simStore.enqueueNotification(s.ctx.db, {
      notificationId,
      subject: endToEndId,
      kind: 'payment.returned',
      payload: { kind: 'payment.returned', endToEndId, returnEndToEndId, amount, returnCode: 'MD06', reason: 'Devolução PIX', returnedAt: now.toISOString() },
      createdAt: now,
    });
    await sim.deliverNow([notificationId]);
    const left = await s.ctx.db.query('SELECT attempts FROM sim_notifications WHERE notification_id = $1', [notificationId]);
    const [refused] = await s.ctx.db.query<{ reason_code: string; amount: number }>('SELECT reason_code, amount FROM rail_refusals WHERE notification_id = $1', [notificationId]);
    const credited = await s.ctx.db.query('SELECT transaction_id FROM transactions WHERE end_to_end_id = $1', [returnEndToEndId]);
    return { notificationId, returnEndToEndId, returnedAt: now, left: left.length, refused, credited: credited.length };
  };

  describe('item 6: returns from the rail are checked', () => {
    let m: MerchantFixture;
    beforeAll(async () => {
      m = await merchantWithKey(s, { depositCents: 100_000 });
    });

    it('a return of a payout that has not settled is refused and recorded, not credited, and not retried', async () => {
      const held = await cashOut(m, await foreignKey(s, { behavior: 'hold' }));
      await waitFor(() => txRow(s.ctx.db, held.transaction_id), (r) => r.stage === 2);
      const before = await balances(s.ctx.db, m.accountId);
      const outcome = await deliverReturn(held.end_to_end_id, 100_000);
      expect(outcome).toMatchObject({ left: 0, credited: 0, refused: { reason_code: 'ORIGINAL_NOT_SETTLED', amount: 100_000 } });
      expect(await balances(s.ctx.db, m.accountId)).toEqual(before);
      expect(await txRow(s.ctx.db, held.transaction_id)).toMatchObject({ stage: 2, payment_status: 'processing', returned_amount: 0 });
      // Delivered again (at least once), it is answered with the same refusal and still not credited.
      const again = await railNotificationHandler(s.ctx)({
        id: outcome.notificationId,
        at: outcome.returnedAt,
        kind: 'payment.returned',
        endToEndId: held.end_to_end_id,
        returnEndToEndId: outcome.returnEndToEndId,
        amount: 100_000,
        returnCode: 'MD06',
        reason: 'Devolução PIX',
        returnedAt: outcome.returnedAt,
      });
      expect(again).toEqual({ refused: { code: 'ORIGINAL_NOT_SETTLED', reason: expect.any(String) } });
      expect(await balances(s.ctx.db, m.accountId)).toEqual(before);
      expect((await outbox(s.ctx.db, held.transaction_id)).map((e) => e.event)).not.toContain('pix.payout.returned');
      await sandbox(s, 'POST', `/payouts/${held.transaction_id}/reject`);
    });

    it('returns beyond the settled amount are refused; what fits is credited and kept in the typed returned_amount', async () => {
      const paid = await cashOut(m, await foreignKey(s));
      await finished(paid.transaction_id);
      const before = await balances(s.ctx.db, m.accountId);
      expect(await deliverReturn(paid.end_to_end_id, 150_000)).toMatchObject({ left: 0, credited: 0, refused: { reason_code: 'RETURN_AMOUNT_EXCEEDED' } });
      expect(await deliverReturn(paid.end_to_end_id, 60_000)).toMatchObject({ left: 0, credited: 1, refused: undefined });
      expect(await deliverReturn(paid.end_to_end_id, 60_000)).toMatchObject({ left: 0, credited: 0, refused: { reason_code: 'RETURN_AMOUNT_EXCEEDED' } });
      expect((await balances(s.ctx.db, m.accountId)).available).toBe(before.available + 60_000);
      expect(await txRow(s.ctx.db, paid.transaction_id)).toMatchObject({ payment_status: 'settled', returned_amount: 60_000 });
      expect(await deliverReturn(paid.end_to_end_id, 40_000)).toMatchObject({ credited: 1, refused: undefined });
      expect(await txRow(s.ctx.db, paid.transaction_id)).toMatchObject({ payment_status: 'returned', returned_amount: 100_000 });
      const view = await m.client.get(`/transactions/${paid.transaction_id}`);
      expect(view.body).toMatchObject({ returned_amount: 100_000 });
    });

    it('the database refuses a returned amount beyond the amount, or on a payout that did not settle', async () => {
      const paid = await cashOut(m, await foreignKey(s));
      await finished(paid.transaction_id);
      expect(await refusal(s.ctx.db, 'UPDATE transactions SET returned_amount = amount + 1 WHERE transaction_id = $1', [paid.transaction_id])).toEqual({
        state: '23514',
        constraint: 'transactions_returned_amount',
      });
      const held = await cashOut(m, await foreignKey(s, { behavior: 'hold' }));
      await waitFor(() => txRow(s.ctx.db, held.transaction_id), (r) => r.stage === 2);
      expect(await refusal(s.ctx.db, 'UPDATE transactions SET returned_amount = 1 WHERE transaction_id = $1', [held.transaction_id])).toEqual({
        state: '23514',
        constraint: 'transactions_returned_amount',
      });
      await sandbox(s, 'POST', `/payouts/${held.transaction_id}/reject`);
    });
  });

  describe('item 7: database backstops', () => {
    let m: MerchantFixture;
    let settled: string;
    let inFlight: string;
    beforeAll(async () => {
      m = await merchantWithKey(s, { depositCents: 100_000 });
      settled = (await cashOut(m, await foreignKey(s))).transaction_id;
      await finished(settled);
      inFlight = (await cashOut(m, await foreignKey(s, { behavior: 'hold' }))).transaction_id;
      await waitFor(() => txRow(s.ctx.db, inFlight), (r) => r.stage === 2);
    });
    afterAll(async () => {
      await sandbox(s, 'POST', `/payouts/${inFlight}/reject`);
    });

    it('a once-only ledger kind cannot be posted twice for one reference (23505 ledger_transactions_once)', async () => {
      expect(await refusal(s.ctx.db, "INSERT INTO ledger_transactions (kind, reference) VALUES ('cash_out_settle', $1)", [settled])).toEqual({
        state: '23505',
        constraint: 'ledger_transactions_once',
      });
      const once = ['cash_out_settle', 'cash_out_reverse', 'payout_return', 'refund_reserve', 'refund_settle', 'refund_reverse', 'med_refund_settle', 'med_refund_reverse', 'pix_in', 'deposit', 'tef'];
      for (const kind of once) {
        const twice = await refusal(s.ctx.db, 'INSERT INTO ledger_transactions (kind, reference) VALUES ($1, $2), ($1, $2)', [kind, `once-${kind}`]);
        expect({ kind, ...twice }).toEqual({ kind, state: '23505', constraint: 'ledger_transactions_once' });
      }
      // Kinds that may repeat for one reference are not bound: the MED blocks of one infraction, and
      // the reservation of a cash-out that timed out and was resumed (reserved and released again).
      for (const kind of ['med_block', 'med_release', 'cash_out_reserve', 'cash_out_release']) {
        const twice = await refusal(s.ctx.db, 'INSERT INTO ledger_transactions (kind, reference) VALUES ($1, $2), ($1, $2)', [kind, `many-${kind}`]);
        expect({ kind, ...twice }).toEqual({ kind });
      }
    });

    it('transactions.kind is one of the known kinds (23514 transactions_kind)', async () => {
      expect(
        await refusal(
          s.ctx.db,
          `INSERT INTO transactions (transaction_id, account_id, kind, type, direction, status, amount) VALUES ('TEST-KIND', $1, 'bogus', 'pix', 'inbound', 1, 100)`,
          [m.accountId],
        ),
      ).toEqual({ state: '23514', constraint: 'transactions_kind' });
    });

    it('status, payment_status and stage agree (23514 transactions_status_stage)', async () => {
      const bad: [string, string][] = [
        ['UPDATE transactions SET stage = 3 WHERE transaction_id = $1', inFlight], // final yet processing
        ["UPDATE transactions SET status = 1 WHERE transaction_id = $1", inFlight], // completed yet in flight
        ["UPDATE transactions SET payment_status = 'failed' WHERE transaction_id = $1", settled], // failed yet completed
        ["UPDATE transactions SET status = 4 WHERE transaction_id = $1", settled], // failed yet settled
        ["UPDATE transactions SET payment_status = 'queued', stage = 2 WHERE transaction_id = $1", settled], // queued yet completed
      ];
      for (const [statement, id] of bad) {
        expect({ statement, ...(await refusal(s.ctx.db, statement, [id])) }).toEqual({ statement, state: '23514', constraint: 'transactions_status_stage' });
      }
    });

    it('an Idempotency-Key binds a record once: idempotency_keys.resource_id is unique (23505)', async () => {
      const [row] = await s.ctx.db.query<{ id: string }>('SELECT id FROM transactions WHERE transaction_id = $1', [settled]);
      const state = await refusal(
        s.ctx.db,
        `INSERT INTO idempotency_keys (merchant_id, method, path, key, request_hash, status, owner_token, locked_until, expires_at, resource_id)
         SELECT $1, 'POST', '/pix/cash-out', k, 'h', 'in_progress', $2::uuid, now(), now() + interval '1 day', $3
           FROM unnest(ARRAY['k-a', 'k-b']) AS k`,
        [m.merchantId, randomUUID(), row!.id],
      );
      expect(state).toEqual({ state: '23505', constraint: 'idempotency_keys_resource_id_key' });
    });
  });

  describe('item 8: credits near the maximum balance', () => {
    it('an inbound PIX that would pass the maximum is refused back to the payer with its reason (422), not retried, nothing credited', async () => {
      const m = await merchantWithKey(s);
      await bulkCredit(m.accountId, MAX_BALANCE_BASE_UNITS - 50_000);
      const before = await balances(s.ctx.db, m.accountId);
      const res = await sandbox(s, 'POST', '/pix/inbound', { account_id: m.accountId, amount: 1000, payer_name: 'Rita Pagadora' });
      expect(res.status).toBe(422);
      expect(res.body).toEqual({ errors: { amount_too_large: expect.stringMatching(/refused.*AM02/) } });
      expect(await balances(s.ctx.db, m.accountId)).toEqual(before);
      const [payment] = await s.ctx.db.query<{ end_to_end_id: string; status: string; reason_code: string }>(
        "SELECT end_to_end_id, status, reason_code FROM sim_payments WHERE receiver_account_id = $1 AND direction = 'inbound'",
        [m.accountId],
      );
      expect(payment).toMatchObject({ status: 'rejected', reason_code: 'AM02' });
      expect(await s.ctx.db.query('SELECT 1 FROM sim_notifications WHERE subject = $1', [payment!.end_to_end_id])).toEqual([]);
      expect(await s.ctx.db.query("SELECT 1 FROM transactions WHERE account_id = $1 AND kind = 'pix_in'", [m.accountId])).toEqual([]);
      const [recorded] = await s.ctx.db.query('SELECT kind, account_id, amount, reason_code FROM rail_refusals WHERE end_to_end_id = $1', [payment!.end_to_end_id]);
      expect(recorded).toEqual({ kind: 'inbound.payment', account_id: m.accountId, amount: 100_000, reason_code: 'AM02' });
      // An infraction cannot be opened against a payment that was never received.
      expect((await sandbox(s, 'POST', '/infractions', { end_to_end_id: payment!.end_to_end_id })).status).toBe(404);
    });

    it('an inbound PIX for no account of this institution is refused (AC03), not retried forever', async () => {
      const endToEndId = newEndToEndId('E', '00360305', new Date());
      const notificationId = `inbound.payment:${endToEndId}`;
      const now = new Date();
      await simStore.enqueueNotification(s.ctx.db, {
        notificationId,
        subject: endToEndId,
        kind: 'inbound.payment',
        payload: {
          kind: 'inbound.payment',
          endToEndId,
          amount: 100_000,
          receiverAccountId: 987_654_321,
          payer: { name: 'Rita', document: '52998224725', ispb: '00360305' },
          description: null,
          txid: null,
          receivedAt: now.toISOString(),
        },
        createdAt: now,
      });
      await sim.deliverNow([notificationId]);
      expect(await s.ctx.db.query('SELECT 1 FROM sim_notifications WHERE notification_id = $1', [notificationId])).toEqual([]);
      const [recorded] = await s.ctx.db.query('SELECT kind, amount, reason_code FROM rail_refusals WHERE notification_id = $1', [notificationId]);
      expect(recorded).toEqual({ kind: 'inbound.payment', amount: 100_000, reason_code: 'AC03' });
    });

    it('a charge payment that would pass the maximum is refused (422) and the charge stays open', async () => {
      const m = await merchantWithKey(s);
      await addPixKey(s, m.accountId, 'evp');
      const charge = await m.client.post('/pix/cash-in', { amount: 15_990 });
      expect(charge.status).toBe(201);
      await bulkCredit(m.accountId, MAX_BALANCE_BASE_UNITS - 50_000);
      const res = await sandbox(s, 'POST', '/pix/pay', { emv: charge.body.emv });
      expect(res.status).toBe(422);
      expect(res.body.errors.amount_too_large).toMatch(/refused/);
      const [row] = await s.ctx.db.query<{ status: string }>(
        'SELECT c.status FROM pix_charges c JOIN transactions t ON t.id = c.transaction_uuid WHERE t.transaction_id = $1',
        [charge.body.transaction_id],
      );
      expect(row!.status).toBe('created');
      expect((await outbox(s.ctx.db, charge.body.transaction_id)).map((e) => e.event)).not.toContain('pix.charge.paid');
    });

    it('a rejected payout always gives its reservation back: no credit may leave the account total past the maximum', async () => {
      const m = await merchantWithKey(s, { depositCents: 10_000 });
      await bulkCredit(m.accountId, MAX_BALANCE_BASE_UNITS - 2_000_000_000_000);
      const held = await cashOut(m, await foreignKey(s, { behavior: 'hold' }));
      await waitFor(() => txRow(s.ctx.db, held.transaction_id), (r) => r.stage === 2);
      const reserved = await balances(s.ctx.db, m.accountId);
      // Fits the available book alone, but not with what is reserved for the payout.
      const fill = MAX_BALANCE_BASE_UNITS - 50_000 - reserved.available;
      const inbound = await sandbox(s, 'POST', '/pix/inbound', { account_id: m.accountId, amount: fill / 100 });
      const rejected = await sandbox(s, 'POST', `/payouts/${held.transaction_id}/reject`);
      expect(rejected.status).toBe(200);
      expect(rejected.body).toMatchObject({ transaction_id: held.transaction_id, payment_status: 'rejected' });
      expect(inbound.status).toBe(422);
      expect(await balances(s.ctx.db, m.accountId)).toEqual({ available: reserved.available + reserved.pending, blocked: 0, pending: 0 });
    });

    it('a payout return the account cannot take is refused (200 returned: false, AM02); the rail gives the amount back to what remains', async () => {
      const m = await merchantWithKey(s, { depositCents: 10_000 });
      const paid = await cashOut(m, await foreignKey(s));
      await finished(paid.transaction_id);
      const settled = await balances(s.ctx.db, m.accountId);
      await bulkCredit(m.accountId, MAX_BALANCE_BASE_UNITS - 50_000 - settled.available);
      const before = await balances(s.ctx.db, m.accountId);
      const res = await sandbox(s, 'POST', `/payouts/${paid.transaction_id}/return`);
      expect(res.status).toBe(200);
      expect(res.body).toMatchObject({ returned: false, detail: expect.stringMatching(/refused the return \(AM02\)/), payout: { payment_status: 'settled', returned_amount: 0 } });
      expect(await balances(s.ctx.db, m.accountId)).toEqual(before);
      const [original] = await s.ctx.db.query<{ returned_amount: number }>('SELECT returned_amount FROM sim_payments WHERE end_to_end_id = $1', [paid.end_to_end_id]);
      expect(original!.returned_amount).toBe(0);
      const [refusedReturn] = await s.ctx.db.query<{ status: string; reason_code: string }>(
        "SELECT status, reason_code FROM sim_payments WHERE original_end_to_end_id = $1 AND kind = 'return'",
        [paid.end_to_end_id],
      );
      expect(refusedReturn).toEqual({ status: 'rejected', reason_code: 'AM02' });
    });

    it('an operator deposit past the account total is refused like one past the book (422 amount_too_large)', async () => {
      const m = await merchantWithKey(s, { depositCents: 10_000 });
      await bulkCredit(m.accountId, MAX_BALANCE_BASE_UNITS - 2_000_000_000_000);
      const held = await cashOut(m, await foreignKey(s, { behavior: 'hold' }));
      await waitFor(() => txRow(s.ctx.db, held.transaction_id), (r) => r.stage === 2);
      const reserved = await balances(s.ctx.db, m.accountId);
      const res = await s.admin('POST', `/accounts/${m.accountId}/deposits`, { amount: (MAX_BALANCE_BASE_UNITS - 50_000 - reserved.available) / 100 });
      expect(res.status).toBe(422);
      expect(res.body.errors).toHaveProperty('amount_too_large');
      await sandbox(s, 'POST', `/payouts/${held.transaction_id}/reject`);
    });
  });
});
