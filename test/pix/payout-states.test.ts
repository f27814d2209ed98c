import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BACKENDS } from '../helpers/db.js';
import { merchantWithKey, type MerchantFixture } from '../helpers/client.js';
import { balances, eventNames, expectLedgerConsistent, foreignKey, outbox, SIM_FAST, sandbox, txRow, waitFor } from '../helpers/pix.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

const ISO_Z = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;

describe.each(BACKENDS)('cash-out states and events through the sandbox on %s', (backend) => {
  let s: TestServer;
  let m: MerchantFixture;
  beforeAll(async () => {
    s = await startTestServer({ backend, env: SIM_FAST });
    m = await merchantWithKey(s, { depositCents: 1_000_000 });
    await s.admin('PATCH', `/accounts/${m.accountId}`, { cash_out_fee_cents: 10 });
  });
  afterAll(async () => {
    await expectLedgerConsistent(s.ctx.db);
    await s?.close();
  });

  const send = async (key: string, amount = 1000, external_id?: string) => {
    const res = await m.client.post('/pix/cash-out', { amount, pix_key: key, ...(external_id ? { external_id } : {}) });
    expect([200, 202]).toContain(res.status);
    return res;
  };
  const finished = (id: string) => waitFor(() => txRow(s.ctx.db, id), (r) => r.stage === 3);

  it('accepted -> settled: pix.payout.processing then pix.payout.confirmed (status settled), receipt available', async () => {
    const key = await foreignKey(s, { name: 'Joana Fornecedora' });
    const res = await send(key, 1000, 'ev-settle');
    const row = await finished(res.body.transaction_id);
    expect(row).toMatchObject({ status: 1, payment_status: 'settled', stage: 3 });
    const events = await outbox(s.ctx.db, res.body.transaction_id);
    expect(events.map((e) => e.event)).toEqual(['pix.payout.processing', 'pix.payout.confirmed']);
    expect(events.every((e) => e.merchant_id === m.merchantId && e.account_id === m.accountId)).toBe(true);
    expect(events[0]!.payload).toMatchObject({ event: 'pix.payout.processing', status: 'processing' });
    expect(events[1]!.payload).toEqual({
      event: 'pix.payout.confirmed',
      status: 'settled',
      transaction_id: res.body.transaction_id,
      end_to_end_id: res.body.end_to_end_id,
      external_id: 'ev-settle',
      account_id: m.accountId,
      direction: 'debit',
      amount: 100_000,
      fee_amount: 1000,
      net_amount: 101_000,
      pix_key: key,
      pix_key_type: 'email',
      receiver: { name: 'Joana Fornecedora', document: expect.stringMatching(/^\d{11}$/), ispb: '18236120', bank_name: 'Nu Pagamentos S.A.' },
      description: null,
      txid: null,
      created_at: expect.stringMatching(ISO_Z),
      settled_at: expect.stringMatching(ISO_Z),
    });
    expect((await m.client.get(`/transactions/${res.body.transaction_id}/receipt`)).status).toBe(200);
  });

  it('accepted -> rejected: pix.payout.failed (status rejected, reason_code), the reservation and fee given back', async () => {
    const before = await balances(s.ctx.db, m.accountId);
    const res = await send(await foreignKey(s, { behavior: 'reject' }));
    const row = await finished(res.body.transaction_id);
    expect(row).toMatchObject({ status: 3, payment_status: 'rejected' });
    const events = await outbox(s.ctx.db, res.body.transaction_id);
    expect(events.map((e) => e.event)).toEqual(['pix.payout.processing', 'pix.payout.failed']);
    expect(events[1]!.payload).toMatchObject({
      status: 'rejected',
      transaction_id: res.body.transaction_id,
      end_to_end_id: res.body.end_to_end_id,
      reason_code: 'REJECTED_BY_RECEIVER',
      reason: expect.any(String),
      rejected_at: expect.stringMatching(ISO_Z),
    });
    expect(await balances(s.ctx.db, m.accountId)).toEqual(before);
    const receipt = await m.client.get(`/transactions/${res.body.transaction_id}/receipt`);
    expect(receipt.status).toBe(422);
    expect(receipt.body).toEqual({ errors: { unprocessable_entity: 'The transaction was not settled, so it has no receipt' } });
  });

  it('protection: 202 queued with pix.payout.queued, reprocessed automatically after SIM_PROTECTION_MS, then settled', async () => {
    const res = await m.client.post('/pix/cash-out', { amount: 1000, pix_key: await foreignKey(s, { fraudFlagged: true }) });
    expect(res.status).toBe(202);
    expect(res.body).toMatchObject({ worked: true, final: false, status: 'queued', transaction_id: expect.stringMatching(/^PIXOUT/) });
    // The record's own state is read through its events: the sandbox reprocesses it after
    // SIM_PROTECTION_MS, which a loaded machine may pass before a read of the row would run.
    const events = await waitFor(() => outbox(s.ctx.db, res.body.transaction_id), (e) => e.length === 3);
    expect(events.map((e) => e.event)).toEqual(['pix.payout.queued', 'pix.payout.processing', 'pix.payout.confirmed']);
    expect(events[0]!.payload).toMatchObject({ status: 'queued', queued_at: expect.stringMatching(ISO_Z) });
  });

  it('hold: pix.payout.held (status processing), then the sandbox settles or rejects it', async () => {
    const key = await foreignKey(s, { behavior: 'hold' });
    const a = await send(key);
    const b = await send(key);
    for (const id of [a.body.transaction_id, b.body.transaction_id]) {
      await waitFor(() => eventNames(s.ctx.db, id), (e) => e.includes('pix.payout.held'));
      expect((await outbox(s.ctx.db, id))[1]!.payload).toMatchObject({ status: 'processing', held_at: expect.stringMatching(ISO_Z) });
    }
    // Nothing happens by itself.
    await new Promise((r) => setTimeout(r, 150));
    expect((await txRow(s.ctx.db, a.body.transaction_id)).stage).toBe(2);

    const settled = await sandbox(s, 'POST', `/payouts/${a.body.transaction_id}/settle`);
    expect(settled.status).toBe(200);
    expect(settled.body).toMatchObject({ transaction_id: a.body.transaction_id, status: 'completed', payment_status: 'settled', final: true });
    expect(await eventNames(s.ctx.db, a.body.transaction_id)).toEqual(['pix.payout.processing', 'pix.payout.held', 'pix.payout.confirmed']);

    const rejected = await sandbox(s, 'POST', `/payouts/${b.body.transaction_id}/reject`);
    expect(rejected.body).toMatchObject({ status: 'rejected', payment_status: 'rejected', final: true });
    expect(await eventNames(s.ctx.db, b.body.transaction_id)).toEqual(['pix.payout.processing', 'pix.payout.held', 'pix.payout.failed']);

    expect(await sandbox(s, 'POST', `/payouts/${a.body.transaction_id}/reject`)).toEqual({
      status: 409,
      body: { errors: { conflict: 'Payout is settled; only a held or accepted payout can be decided' } },
    });
    expect(await sandbox(s, 'POST', '/payouts/PIXOUT00000000000000NOPE/settle')).toEqual({ status: 404, body: { errors: { not_found: 'Payout not found' } } });
  });

  it('an accepted payout can be settled from the sandbox before the simulated delay', async () => {
    const slow = await startTestServer({ backend, env: { SIM_SETTLEMENT_MS: '600000' } });
    try {
      const p = await merchantWithKey(slow, { depositCents: 10_000 });
      const res = await p.client.post('/pix/cash-out', { amount: 100, pix_key: await foreignKey(slow) });
      expect((await sandbox(slow, 'POST', `/payouts/${res.body.transaction_id}/settle`)).body).toMatchObject({ payment_status: 'settled' });
    } finally {
      await slow.close();
    }
  });

  it('returned: pix.payout.returned with total_refunded, remaining_refundable, is_partial; beyond what remains, pix.payout.return.failed', async () => {
    const res = await send(await foreignKey(s), 1000, 'ev-return');
    await finished(res.body.transaction_id);
    const before = await balances(s.ctx.db, m.accountId);

    const part = await sandbox(s, 'POST', `/payouts/${res.body.transaction_id}/return`, { amount: 300 });
    expect(part.status).toBe(201);
    expect(part.body).toMatchObject({ returned: true, transaction_id: expect.stringMatching(/^PIXDEV/), end_to_end_id: expect.stringMatching(/^D18236120/), amount: 30_000 });
    expect((await balances(s.ctx.db, m.accountId)).available).toBe(before.available + 30_000);

    const over = await sandbox(s, 'POST', `/payouts/${res.body.transaction_id}/return`, { amount: 800 });
    expect(over.status).toBe(200);
    expect(over.body).toMatchObject({ returned: false });

    const rest = await sandbox(s, 'POST', `/payouts/${res.body.transaction_id}/return`);
    expect(rest.body).toMatchObject({ returned: true, amount: 70_000 });
    expect(rest.body.payout).toMatchObject({ payment_status: 'returned', returned_amount: 100_000 });
    expect((await balances(s.ctx.db, m.accountId)).available).toBe(before.available + 100_000);

    const events = await outbox(s.ctx.db, res.body.transaction_id);
    expect(events.map((e) => e.event)).toEqual([
      'pix.payout.processing',
      'pix.payout.confirmed',
      'pix.payout.returned',
      'pix.payout.return.failed',
      'pix.payout.returned',
    ]);
    expect(events[2]!.payload).toMatchObject({
      status: 'returned',
      direction: 'credit',
      transaction_id: res.body.transaction_id,
      end_to_end_id: res.body.end_to_end_id,
      external_id: 'ev-return',
      amount: 30_000,
      original_amount: 100_000,
      return_transaction_id: part.body.transaction_id,
      return_end_to_end_id: part.body.end_to_end_id,
      total_refunded: 30_000,
      remaining_refundable: 70_000,
      is_partial: true,
      returned_at: expect.stringMatching(ISO_Z),
    });
    expect(events[3]!.payload).toMatchObject({ status: 'rejected', amount: 80_000, reason_code: 'RETURN_AMOUNT_EXCEEDED' });
    expect(events[4]!.payload).toMatchObject({ total_refunded: 100_000, remaining_refundable: 0, is_partial: true });

    // The return shows in the statement as an inbound PIX from the receiver.
    const ret = await m.client.get(`/transactions/${part.body.transaction_id}`);
    expect(ret.body).toMatchObject({ direction: 'inbound', type: 'pix', amount: 30_000, original_transaction_id: res.body.transaction_id, payer_bank_name: 'Nu Pagamentos S.A.' });

    const pending = await send(await foreignKey(s, { behavior: 'hold' }));
    expect(await sandbox(s, 'POST', `/payouts/${pending.body.transaction_id}/return`)).toMatchObject({ status: 409 });
  });
});
