import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { railNotificationHandler } from '../../src/pix/railEvents.js';
import { recoverUnsent } from '../../src/pix/recovery.js';
import type { RailNotification } from '../../src/rail/rail.js';
import { addPixKey, merchantWithKey, type MerchantFixture } from '../helpers/client.js';
import { BACKENDS } from '../helpers/db.js';
import { validCpf } from '../helpers/fixtures.js';
import { finalRecord, ledgerOf, medEvents, received, reportInfraction, resolveInfraction } from '../helpers/med.js';
import { balances, expectLedgerConsistent, foreignKey, outbox, SIM_FAST, sandbox, txRow, waitFor } from '../helpers/pix.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

/**
 * The MED flow end to end through the sandbox (contract section 4) and the merchant API: an
 * infraction blocks the claimed amount; its resolution refunds the payer from the blocked funds
 * (accepted) or releases them (rejected, cancelled). Balances, ledger entries, statement rows and
 * outbox events are checked at each step.
 */

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;
const ISO = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;
const PAYER = { payer_name: 'Carlos Pagador', payer_document: '52998224725', payer_ispb: '60746948' };

describe.each(BACKENDS)('MED flow on %s', (backend) => {
  let s: TestServer;
  beforeAll(async () => {
    s = await startTestServer({ backend, env: SIM_FAST });
  });
  afterAll(async () => {
    if (s) await expectLedgerConsistent(s.ctx.db);
    await s?.close();
  });

  /** A merchant with `depositCents` and one received PIX of `receivedCents` (from PAYER). */
  async function merchantWithReceived(depositCents: number, receivedCents: number) {
    const m = await merchantWithKey(s, { depositCents });
    const original = await received(s, m, receivedCents, PAYER);
    return { m, original };
  }

  it('an infraction blocks the claimed amount: OPEN, pix.infraction.created and pix.refund.requested, the MED record', async () => {
    const { m, original } = await merchantWithReceived(0, 10_000);
    const res = await reportInfraction(s, { end_to_end_id: original.end_to_end_id, reason: 'fraud', amount: 6000 });
    expect(res.status).toBe(201);
    const id = res.body.id;
    expect(res.body).toEqual({
      id: expect.stringMatching(UUID),
      status: 'OPEN',
      reason: 'fraud',
      account_id: m.accountId,
      transaction_id: original.transaction_id,
      end_to_end_id: original.end_to_end_id,
      original_amount: 1_000_000,
      amount: 600_000,
      blocked_amount: 600_000,
      refunded_amount: 0,
      released_amount: 0,
      payer: { name: 'Carlos Pagador', document: '52998224725', ispb: '60746948', bank_name: 'Banco Bradesco S.A.' },
      decision: null,
      refund: { status: 'requested', transaction_id: null, end_to_end_id: null, amount: null, completed_at: null },
      defense: null,
      defense_deadline: expect.stringMatching(ISO),
      created_at: expect.stringMatching(ISO),
      updated_at: expect.stringMatching(ISO),
      resolved_at: null,
    });
    expect(Date.parse(res.body.defense_deadline) - Date.parse(res.body.created_at)).toBe(7 * 86_400_000);
    expect(await balances(s.ctx.db, m.accountId)).toEqual({ available: 400_000, blocked: 600_000, pending: 0 });
    expect(await ledgerOf(s.ctx.db, id)).toEqual([
      ['med_block', `account:${m.accountId}:available`, -600_000],
      ['med_block', `account:${m.accountId}:blocked`, 600_000],
    ]);
    expect((await m.client.get('/balance')).body).toMatchObject({ available: 400_000, blocked: 600_000, safe: 400_000 });

    const events = await medEvents(s.ctx.db, id);
    expect(events.map((e) => e.event)).toEqual(['pix.infraction.created', 'pix.refund.requested']);
    expect(events[0]!.payload).toEqual({
      event: 'pix.infraction.created',
      status: 'OPEN',
      infraction_id: id,
      transaction_id: original.transaction_id,
      end_to_end_id: original.end_to_end_id,
      account_id: m.accountId,
      reason: 'fraud',
      amount: 600_000,
      original_amount: 1_000_000,
      blocked_amount: 600_000,
      refunded_amount: 0,
      released_amount: 0,
      defense_deadline: res.body.defense_deadline,
      created_at: res.body.created_at,
    });
    expect(events[1]!.payload).toEqual({
      event: 'pix.refund.requested',
      status: 'requested',
      infraction_id: id,
      transaction_id: null,
      end_to_end_id: null,
      original_transaction_id: original.transaction_id,
      original_end_to_end_id: original.end_to_end_id,
      account_id: m.accountId,
      amount: 600_000,
      original_amount: 1_000_000,
      requested_amount: 600_000,
      blocked_amount: 600_000,
      refunded_amount: 0,
      released_amount: 0,
      requested_at: res.body.created_at,
    });
    expect(events.every((e) => e.merchant_id === m.merchantId && e.account_id === m.accountId)).toBe(true);

    // The merchant sees the same record; the block is not a statement row.
    expect((await m.client.get(`/med/${id}`)).body).toEqual({ worked: true, ...res.body });
    expect((await m.client.get('/med')).body).toEqual({ worked: true, data: [res.body], page: 1, per_page: 20 });
    expect((await m.client.get('/statement')).body.data.map((d: any) => d.transaction_id)).toEqual([original.transaction_id]);
  });

  it('accepted: the blocked funds go back to the payer (MEDRET…, D…, blocked -> central bank), CLOSED, pix.infraction.resolved then pix.refund.completed counting voluntary refunds', async () => {
    const { m, original } = await merchantWithReceived(0, 10_000);
    // A voluntary partial refund first: rule 6 counts it in the totals of the MED refund.
    const voluntary = await m.client.post('/pix/refund', { original_transaction_id: original.transaction_id, amount: 1500 });
    expect(voluntary.status).toBe(202);
    await finalRecord(s, voluntary.body.transaction_id);

    const reported = await reportInfraction(s, { end_to_end_id: original.end_to_end_id });
    expect(reported.body).toMatchObject({ status: 'OPEN', reason: 'fraud', amount: 850_000, blocked_amount: 850_000 });
    const id = reported.body.id;
    expect(await balances(s.ctx.db, m.accountId)).toEqual({ available: 0, blocked: 850_000, pending: 0 });

    const resolved = await resolveInfraction(s, id, 'accepted');
    expect(resolved.status).toBe(200);
    expect(resolved.body).toMatchObject({
      id,
      status: 'CLOSED',
      decision: 'accepted',
      resolved_at: expect.stringMatching(ISO),
      // The simulator settles 30 ms after the order: on a busy machine the answer may already say so.
      refund: { status: expect.stringMatching(/^(processing|settled)$/), transaction_id: expect.stringMatching(/^MEDRET\d{14}[A-Z0-9]{10}$/), end_to_end_id: expect.stringMatching(/^D99999999\d{12}[A-Z0-9]{11}$/), amount: 850_000 },
    });
    const refundId: string = resolved.body.refund.transaction_id;
    // While the return is in flight its money stays blocked.
    const settled = await finalRecord(s, refundId);
    expect(settled).toMatchObject({ kind: 'med_refund', direction: 'outbound', type: 'pix', status: 1, payment_status: 'settled', amount: 850_000, counterparty_name: 'Carlos Pagador', recipient_document: '52998224725', recipient_ispb: '60746948' });
    const originalRow = await txRow(s.ctx.db, original.transaction_id);
    expect(settled).toMatchObject({ return_code: 'FR01', infraction_id: id, original_id: originalRow.id, recipient_bank_name: originalRow.payer_bank_name, metadata: {} });
    expect(await balances(s.ctx.db, m.accountId)).toEqual({ available: 0, blocked: 0, pending: 0 });
    expect(await ledgerOf(s.ctx.db, refundId)).toEqual([
      ['med_refund_settle', `account:${m.accountId}:blocked`, -850_000],
      ['med_refund_settle', 'institution:central_bank', 850_000],
    ]);

    const record = (await m.client.get(`/med/${id}`)).body;
    expect(record).toMatchObject({ status: 'CLOSED', blocked_amount: 0, refunded_amount: 850_000, released_amount: 0, refund: { status: 'settled', transaction_id: refundId, amount: 850_000, completed_at: expect.stringMatching(ISO) } });

    const events = await medEvents(s.ctx.db, id);
    expect(events.map((e) => e.event)).toEqual(['pix.infraction.created', 'pix.refund.requested', 'pix.infraction.resolved', 'pix.refund.completed']);
    expect(events[2]!.payload).toMatchObject({ status: 'CLOSED', decision: 'accepted', infraction_id: id, transaction_id: original.transaction_id, refund_amount: 850_000, refund_transaction_id: refundId, resolved_at: record.resolved_at });
    expect(events[3]!.payload).toEqual({
      event: 'pix.refund.completed',
      status: 'settled',
      infraction_id: id,
      transaction_id: refundId,
      end_to_end_id: settled.end_to_end_id,
      original_transaction_id: original.transaction_id,
      original_end_to_end_id: original.end_to_end_id,
      account_id: m.accountId,
      amount: 850_000,
      original_amount: 1_000_000,
      requested_amount: 850_000,
      blocked_amount: 0,
      refunded_amount: 850_000,
      released_amount: 0,
      reason: 'FR01',
      description: 'Devolução MED',
      created_at: expect.stringMatching(ISO),
      total_refunded: 1_000_000,
      remaining_refundable: 0,
      is_partial: true,
      completed_at: record.refund.completed_at,
    });

    // The return is a statement row (outbound PIX), readable as a refund and as a transaction.
    const item = (await m.client.get('/statement')).body.data.find((d: any) => d.transaction_id === refundId);
    expect(item).toMatchObject({ type: 'pix', direction: 'outbound', status: 'completed', payment_status: 'settled', amount: 850_000, description: 'Devolução MED', counterparty_name: 'Carlos Pagador' });
    expect((await m.client.get(`/pix/refund/${refundId}`)).body).toMatchObject({ status: 'settled', infraction_id: id, total_refunded: 1_000_000, remaining_refundable: 0 });
    // Nothing is left to refund voluntarily.
    const more = await m.client.post('/pix/refund', { original_transaction_id: original.transaction_id, amount: 1 });
    expect(more.status).toBe(422);
    expect(more.body).toEqual({ worked: false, errors: { unprocessable_entity: 'refund amount exceeds the original transaction' } });
  });

  for (const [decision, status] of [
    ['rejected', 'CLOSED'],
    ['cancelled', 'CANCELLED'],
  ] as const) {
    it(`${decision}: the block is released to available, ${status}, pix.infraction.resolved and pix.refund.completed (status completed, nothing refunded)`, async () => {
      const { m, original } = await merchantWithReceived(100, 5000);
      const id = (await reportInfraction(s, { end_to_end_id: original.end_to_end_id, amount: 3000, reason: 'scam' })).body.id;
      expect(await balances(s.ctx.db, m.accountId)).toEqual({ available: 210_000, blocked: 300_000, pending: 0 });
      const resolved = await resolveInfraction(s, id, decision);
      expect(resolved.status).toBe(200);
      expect(resolved.body).toMatchObject({
        status,
        decision,
        blocked_amount: 0,
        refunded_amount: 0,
        released_amount: 300_000,
        refund: { status: 'released', transaction_id: null, end_to_end_id: null, amount: null },
        resolved_at: expect.stringMatching(ISO),
      });
      expect(await balances(s.ctx.db, m.accountId)).toEqual({ available: 510_000, blocked: 0, pending: 0 });
      expect(await ledgerOf(s.ctx.db, id)).toEqual([
        ['med_block', `account:${m.accountId}:available`, -300_000],
        ['med_block', `account:${m.accountId}:blocked`, 300_000],
        ['med_release', `account:${m.accountId}:blocked`, -300_000],
        ['med_release', `account:${m.accountId}:available`, 300_000],
      ]);
      const events = await medEvents(s.ctx.db, id);
      expect(events.map((e) => [e.event, e.payload.status])).toEqual([
        ['pix.infraction.created', 'OPEN'],
        ['pix.refund.requested', 'requested'],
        ['pix.infraction.resolved', status],
        ['pix.refund.completed', 'completed'],
      ]);
      expect(events[2]!.payload).toMatchObject({ decision, refund_amount: 0, released_amount: 300_000, blocked_amount: 0, resolved_at: resolved.body.resolved_at });
      expect(events[3]!.payload).toMatchObject({
        outcome: 'released',
        transaction_id: null,
        amount: 0,
        released_amount: 300_000,
        total_refunded: 0,
        remaining_refundable: 500_000,
        is_partial: false,
      });
      // No statement row; the original can be refunded voluntarily again (refund rule 5 no longer applies).
      expect((await m.client.get('/statement')).body.data.map((d: any) => d.transaction_id)).toEqual([original.transaction_id, expect.stringMatching(/^DEP/)]);
      expect((await m.client.post('/pix/refund', { original_transaction_id: original.transaction_id, amount: 100 })).status).toBe(202);
    });
  }

  it('a short balance: what is there is blocked, then every credit tops the block up until covered, oldest infraction first; the safe balance excludes it', async () => {
    const m = await merchantWithKey(s, { depositCents: 0 });
    const key = await addPixKey(s, m.accountId, 'evp');
    const first = await received(s, m, 4000, PAYER);
    const second = await received(s, m, 3000, PAYER);
    // Most of it is on its way out: a cash-out the receiving side holds (reserved in pending).
    const held = await m.client.post('/pix/cash-out', { amount: 6000, pix_key: await foreignKey(s, { behavior: 'hold' }) });
    expect(held.status).toBe(200);
    await waitFor(() => outbox(s.ctx.db, held.body.transaction_id), (e) => e.some((x) => x.event === 'pix.payout.held'));
    expect(await balances(s.ctx.db, m.accountId)).toEqual({ available: 100_000, blocked: 0, pending: 600_000 });

    const older = (await reportInfraction(s, { end_to_end_id: first.end_to_end_id })).body;
    expect(older).toMatchObject({ amount: 400_000, blocked_amount: 100_000 });
    const newer = (await reportInfraction(s, { end_to_end_id: second.end_to_end_id, amount: 2000 })).body;
    expect(newer).toMatchObject({ amount: 200_000, blocked_amount: 0 });
    expect(await balances(s.ctx.db, m.accountId)).toEqual({ available: 0, blocked: 100_000, pending: 600_000 });
    const blocked = async () => [(await m.client.get(`/med/${older.id}`)).body.blocked_amount, (await m.client.get(`/med/${newer.id}`)).body.blocked_amount];

    // Nothing can leave: cash-outs and voluntary refunds see a safe balance of 0.
    const cashOut = await m.client.post('/pix/cash-out', { amount: 1, pix_key: await foreignKey(s) });
    expect(cashOut.status).toBe(400);
    expect(cashOut.body.code).toBe('insufficient_balance');
    const third = await received(s, m, 500, PAYER); // credited, and blocked at once
    expect(await blocked()).toEqual([150_000, 0]);
    const refund = await m.client.post('/pix/refund', { original_transaction_id: third.transaction_id, amount: 1 });
    expect(refund.status).toBe(422);
    expect(refund.body).toEqual({ worked: false, errors: { unprocessable_entity: 'insufficient balance' } });
    expect((await m.client.get('/balance')).body).toMatchObject({ available: 0, blocked: 150_000, pending: 600_000, safe: 0 });

    // A deposit, then a paid charge: each tops up the older block first, then the newer.
    expect((await s.admin('POST', `/accounts/${m.accountId}/deposits`, { amount: 2000 })).status).toBe(201);
    expect(await blocked()).toEqual([350_000, 0]);
    const charge = await m.client.post('/pix/cash-in', { amount: 1500, pix_key: key });
    expect((await sandbox(s, 'POST', '/pix/pay', { emv: charge.body.emv })).status).toBe(201);
    expect(await blocked()).toEqual([400_000, 100_000]);
    expect(await balances(s.ctx.db, m.accountId)).toEqual({ available: 0, blocked: 500_000, pending: 600_000 });

    // The held cash-out is rejected: its released reservation is a credit too.
    expect((await sandbox(s, 'POST', `/payouts/${held.body.transaction_id}/reject`)).status).toBe(200);
    expect(await blocked()).toEqual([400_000, 200_000]);
    expect(await balances(s.ctx.db, m.accountId)).toEqual({ available: 500_000, blocked: 600_000, pending: 0 });
    // Every top-up is a med_block posting with the infraction as reference.
    expect((await ledgerOf(s.ctx.db, older.id)).filter(([, code]) => code.endsWith(':blocked')).map(([, , amount]) => amount)).toEqual([100_000, 50_000, 200_000, 50_000]);

    // A rejected infraction's money goes back to available.
    await resolveInfraction(s, newer.id, 'rejected');
    expect(await balances(s.ctx.db, m.accountId)).toEqual({ available: 700_000, blocked: 400_000, pending: 0 });
    await expectLedgerConsistent(s.ctx.db);
  });

  it('a block short at the decision: accepted refunds what was blocked (a partial MED refund); a released block tops up another short one', async () => {
    const m = await merchantWithKey(s, { depositCents: 0 });
    const a = await received(s, m, 1000, PAYER);
    const b = await received(s, m, 1000, PAYER);
    const out = await m.client.post('/pix/cash-out', { amount: 1500, pix_key: await foreignKey(s) });
    await finalRecord(s, out.body.transaction_id);
    const ia = (await reportInfraction(s, { end_to_end_id: a.end_to_end_id })).body;
    const ib = (await reportInfraction(s, { end_to_end_id: b.end_to_end_id })).body;
    expect([ia.blocked_amount, ib.blocked_amount]).toEqual([50_000, 0]);
    // Rejecting A releases its 500; B takes it at once.
    await resolveInfraction(s, ia.id, 'rejected');
    expect((await m.client.get(`/med/${ib.id}`)).body.blocked_amount).toBe(50_000);
    expect(await balances(s.ctx.db, m.accountId)).toEqual({ available: 0, blocked: 50_000, pending: 0 });
    // Accepting B refunds the 500 it holds, not the 1000 it claimed.
    const resolved = (await resolveInfraction(s, ib.id, 'accepted')).body;
    expect(resolved.refund).toMatchObject({ amount: 50_000 });
    await finalRecord(s, resolved.refund.transaction_id);
    const completed = (await medEvents(s.ctx.db, ib.id)).find((e) => e.event === 'pix.refund.completed')!;
    expect(completed.payload).toMatchObject({ status: 'settled', amount: 50_000, requested_amount: 100_000, total_refunded: 50_000, remaining_refundable: 50_000, is_partial: true });
    expect(await balances(s.ctx.db, m.accountId)).toEqual({ available: 0, blocked: 0, pending: 0 });
  });

  it('accepted with nothing blocked: CLOSED, no return, pix.refund.completed with outcome nothing_blocked', async () => {
    const m = await merchantWithKey(s);
    const a = await received(s, m, 800, PAYER);
    const out = await m.client.post('/pix/cash-out', { amount: 800, pix_key: await foreignKey(s) });
    await finalRecord(s, out.body.transaction_id);
    const id = (await reportInfraction(s, { end_to_end_id: a.end_to_end_id })).body.id;
    const resolved = (await resolveInfraction(s, id, 'accepted')).body;
    expect(resolved).toMatchObject({ status: 'CLOSED', decision: 'accepted', blocked_amount: 0, refund: { status: 'released', transaction_id: null } });
    const events = await medEvents(s.ctx.db, id);
    expect(events.map((e) => e.event)).toEqual(['pix.infraction.created', 'pix.refund.requested', 'pix.infraction.resolved', 'pix.refund.completed']);
    expect(events[3]!.payload).toMatchObject({ status: 'completed', outcome: 'nothing_blocked', amount: 0, total_refunded: 0 });
  });

  it('refund rule 5: a voluntary refund of a PIX under an open infraction (OPEN or defense_submitted) is 422 with worked: false', async () => {
    const { m, original } = await merchantWithReceived(1000, 2000);
    const id = (await reportInfraction(s, { end_to_end_id: original.end_to_end_id, amount: 100 })).body.id;
    const expected = {
      worked: false,
      errors: { unprocessable_entity: 'transaction has an open MED infraction: its refund is executed automatically when the infraction is resolved' },
    };
    for (const body of [{ original_transaction_id: original.transaction_id, amount: 100 }, { original_e2e_id: original.end_to_end_id }]) {
      const res = await m.client.post('/pix/refund', body);
      expect(res.status).toBe(422);
      expect(res.body).toEqual(expected);
    }
    expect((await m.client.post(`/med/${id}/defense`, { text: 'Entregue ao cliente' })).status).toBe(201);
    const res = await m.client.post('/pix/refund', { original_transaction_id: original.transaction_id, amount: 100 });
    expect(res.status).toBe(422);
    expect(res.body).toEqual(expected);
    expect((await m.client.get('/statement')).body.data.filter((d: any) => d.direction === 'outbound')).toEqual([]);
    // Another PIX of the same account is refundable as usual.
    const other = await received(s, m, 300);
    expect((await m.client.post('/pix/refund', { original_transaction_id: other.transaction_id })).status).toBe(202);
  });

  it('a paid cash-in charge can be disputed like any PIX received', async () => {
    const m = await merchantWithKey(s);
    await addPixKey(s, m.accountId, 'evp');
    const charge = (await m.client.post('/pix/cash-in', { amount: 2500 })).body;
    const paid = (await sandbox(s, 'POST', '/pix/pay', { emv: charge.emv })).body;
    const res = await reportInfraction(s, { end_to_end_id: paid.end_to_end_id });
    expect(res.status).toBe(201);
    expect(res.body).toMatchObject({ transaction_id: charge.transaction_id, amount: 250_000, blocked_amount: 250_000 });
  });

  it('the sandbox refuses unknown payments, amounts beyond the payment, a second open infraction, bad ids, decisions and bodies', async () => {
    const { m, original } = await merchantWithReceived(1000, 1000);
    const out = await m.client.post('/pix/cash-out', { amount: 100, pix_key: await foreignKey(s) });
    const cases: [unknown, number, unknown][] = [
      [{ end_to_end_id: 'E99999999202601010000NOSUCHPAYMT' }, 404, { not_found: 'No PIX received by this institution has that end_to_end_id' }],
      [{ end_to_end_id: out.body.end_to_end_id }, 404, { not_found: 'No PIX received by this institution has that end_to_end_id' }],
      [{ end_to_end_id: original.end_to_end_id, amount: 1001 }, 422, { unprocessable_entity: 'amount exceeds what can still be returned of the payment (1000 of 1000 cents)' }],
      [{}, 400, { bad_request: { end_to_end_id: ['is required'] } }],
      [{ end_to_end_id: 'PIXIN1', amount: 0, reason: '', extra: 1 }, 400, { bad_request: { end_to_end_id: ['must be an end-to-end id (E + ISPB + date + 11 characters)'], amount: ['must be greater than or equal to 1'], reason: ["can't be blank"], extra: ['is not a permitted field'] } }],
    ];
    for (const [body, status, errors] of cases) expect(await reportInfraction(s, body as Record<string, unknown>), JSON.stringify(body)).toEqual({ status, body: { errors } });

    const id = (await reportInfraction(s, { end_to_end_id: original.end_to_end_id, amount: 400 })).body.id;
    expect(await reportInfraction(s, { end_to_end_id: original.end_to_end_id, amount: 100 })).toEqual({ status: 409, body: { errors: { conflict: `The payment already has an open infraction (${id})` } } });
    expect(await resolveInfraction(s, id, 'maybe')).toEqual({ status: 400, body: { errors: { bad_request: { decision: ['must be one of: accepted, rejected, cancelled'] } } } });
    expect(await sandbox(s, 'POST', `/infractions/${id}/resolve`, {})).toEqual({ status: 400, body: { errors: { bad_request: { decision: ['is required'] } } } });
    expect(await resolveInfraction(s, 'not-a-uuid', 'accepted')).toEqual({ status: 400, body: { errors: { bad_request: 'id must be a valid UUID' } } });
    expect(await resolveInfraction(s, '6f1c2a8e-3b4d-4e5f-9a0b-1c2d3e4f5a6b', 'accepted')).toEqual({ status: 404, body: { errors: { not_found: 'Infraction not found' } } });
    expect((await resolveInfraction(s, id, 'rejected')).status).toBe(200);
    expect(await resolveInfraction(s, id, 'accepted')).toEqual({ status: 409, body: { errors: { conflict: 'The infraction is already CLOSED' } } });
    // Once resolved, a new infraction may be reported, within what is left of the payment.
    expect((await reportInfraction(s, { end_to_end_id: original.end_to_end_id })).body).toMatchObject({ status: 'OPEN', amount: 100_000 });
    // The sandbox needs the admin token.
    for (const path of ['/infractions', `/infractions/${id}/resolve`]) {
      const res = await fetch(`${s.url}/api/sandbox${path}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' });
      expect(res.status).toBe(401);
      expect(await res.json()).toEqual({ errors: { unauthorized: 'Missing or invalid admin token' } });
    }
    // Everything refused wrote nothing.
    const [{ n }] = (await s.ctx.db.query<{ n: number }>('SELECT count(*)::bigint AS n FROM med_infractions WHERE account_id = $1', [m.accountId])) as [{ n: number }];
    expect(n).toBe(2);
  });

  it('rail notifications are applied once: a redelivered report or decision changes nothing', async () => {
    const { m, original } = await merchantWithReceived(0, 3000);
    const handler = railNotificationHandler(s.ctx);
    const infractionId = '0d7f3c62-58d3-4b7e-9a51-2f4d0f1a9c11';
    const at = new Date();
    const reported: RailNotification = { id: `infraction.reported:${infractionId}`, at, kind: 'infraction.reported', infractionId, endToEndId: original.end_to_end_id, amount: 300_000, reason: 'fraud', reportedAt: at };
    await Promise.all([handler(reported), handler(reported)]);
    await handler({ ...reported, id: 'test:another-delivery-of-the-same-report' });
    expect(await balances(s.ctx.db, m.accountId)).toEqual({ available: 0, blocked: 300_000, pending: 0 });
    expect((await medEvents(s.ctx.db, infractionId)).map((e) => e.event)).toEqual(['pix.infraction.created', 'pix.refund.requested']);

    const resolved: RailNotification = { id: `infraction.resolved:${infractionId}`, at, kind: 'infraction.resolved', infractionId, endToEndId: original.end_to_end_id, decision: 'accepted', resolvedAt: at };
    await Promise.all([handler(resolved), handler(resolved)]);
    await handler({ ...resolved, id: 'test:another-delivery-of-the-same-decision' });
    await handler({ ...resolved, id: 'test:a-contradicting-decision', decision: 'rejected' });
    const record = (await m.client.get(`/med/${infractionId}`)).body;
    expect(record).toMatchObject({ status: 'CLOSED', decision: 'accepted' });
    await finalRecord(s, record.refund.transaction_id);
    const [{ n }] = (await s.ctx.db.query<{ n: number }>(`SELECT count(*)::bigint AS n FROM transactions WHERE kind = 'med_refund' AND original_id = (SELECT id FROM transactions WHERE transaction_id = $1)`, [original.transaction_id])) as [{ n: number }];
    expect(n).toBe(1);
    expect((await medEvents(s.ctx.db, infractionId)).map((e) => e.event)).toEqual(['pix.infraction.created', 'pix.refund.requested', 'pix.infraction.resolved', 'pix.refund.completed']);
    expect(await balances(s.ctx.db, m.accountId)).toEqual({ available: 0, blocked: 0, pending: 0 });
  });

  it('a MED return the process could not send is sent by the recovery worker, once', async () => {
    const { m, original } = await merchantWithReceived(0, 1200);
    const id = (await reportInfraction(s, { end_to_end_id: original.end_to_end_id })).body.id;
    const rail = s.ctx.rail;
    // The context's rail is the adapter seen through proxies (deadline, metrics) that forward to
    // the adapter's own method: the stub is set as an own property of the adapter (assignments pass
    // through the proxies) and deleted afterwards. Assigning the saved outer method back instead
    // would make the adapter call its own wrapper: endless recursion.
    rail.sendReturn = async () => {
      throw new Error('connection reset by the rail');
    };
    let refundId: string;
    try {
      const resolved = (await resolveInfraction(s, id, 'accepted')).body;
      expect(resolved).toMatchObject({ status: 'CLOSED', refund: { status: 'processing' } });
      refundId = resolved.refund.transaction_id;
      expect(await txRow(s.ctx.db, refundId)).toMatchObject({ stage: 1 });
    } finally {
      delete (rail as Partial<typeof rail>).sendReturn;
    }
    expect(await recoverUnsent(s.ctx, { olderThanMs: 0 })).toBeGreaterThanOrEqual(1);
    await finalRecord(s, refundId);
    expect(await balances(s.ctx.db, m.accountId)).toEqual({ available: 0, blocked: 0, pending: 0 });
    expect((await medEvents(s.ctx.db, id)).filter((e) => e.event === 'pix.refund.completed')).toHaveLength(1);
    expect((await m.client.get(`/med/${id}`)).body.refund.status).toBe('settled');
  });

  it('payments to the account from several payers can be disputed independently', async () => {
    const m = await merchantWithKey(s);
    const one = await received(s, m, 100, { payer_name: 'Ana', payer_document: validCpf(), payer_ispb: '00000000' });
    const two = await received(s, m, 200, { payer_name: 'Beto', payer_document: validCpf(), payer_ispb: '18236120' });
    const a = (await reportInfraction(s, { end_to_end_id: one.end_to_end_id })).body;
    const b = (await reportInfraction(s, { end_to_end_id: two.end_to_end_id })).body;
    expect([a.payer.name, b.payer.name, a.payer.bank_name, b.payer.bank_name]).toEqual(['Ana', 'Beto', 'Banco do Brasil S.A.', 'Nu Pagamentos S.A.']);
    expect(await balances(s.ctx.db, m.accountId)).toEqual({ available: 0, blocked: 30_000, pending: 0 });
    expect((await outbox(s.ctx.db, a.id)).length).toBe(2);
  });
});
