import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BACKENDS } from '../helpers/db.js';
import { merchantWithKey, type MerchantFixture } from '../helpers/client.js';
import { balances, expectLedgerConsistent, foreignKey, outbox, SIM_FAST, sandbox, txRow, waitFor } from '../helpers/pix.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

const DAY_MS = 86_400_000;

describe.each(BACKENDS)('POST /pix/refund and GET /pix/refund/:id on %s', (backend) => {
  let s: TestServer;
  let m: MerchantFixture;
  let shift = 0;
  beforeAll(async () => {
    s = await startTestServer({ backend, env: SIM_FAST, clock: { now: () => new Date(Date.now() + shift) } });
    m = await merchantWithKey(s, { depositCents: 100_000 });
  });
  afterAll(async () => {
    await expectLedgerConsistent(s.ctx.db);
    await s?.close();
  });

  const inbound = async (amount: number, who: MerchantFixture = m) => {
    const res = await sandbox(s, 'POST', '/pix/inbound', { account_id: who.accountId, amount, payer_name: 'Carlos Pagador', payer_document: '52998224725', payer_ispb: '60746948' });
    expect(res.status).toBe(201);
    return res.body as { transaction_id: string; end_to_end_id: string; amount: number };
  };
  const finished = (id: string) => waitFor(() => txRow(s.ctx.db, id), (r) => r.stage === 3);

  it('202 accepted, then pix.refund.completed with total_refunded, remaining_refundable and is_partial (rule 6)', async () => {
    const original = await inbound(10_000);
    const before = await balances(s.ctx.db, m.accountId);
    const res = await m.client.post('/pix/refund', { original_transaction_id: original.transaction_id, amount: 3000 });
    expect(res.status).toBe(202);
    expect(res.body).toEqual({
      worked: true,
      transaction_id: expect.stringMatching(/^PIXRET\d{14}[A-Z0-9]{10}$/),
      end_to_end_id: expect.stringMatching(/^D99999999\d{12}[A-Z0-9]{11}$/),
      original_transaction_id: original.transaction_id,
      original_end_to_end_id: original.end_to_end_id,
      amount: 300_000,
      reason: 'MD06',
      description: 'Devolução PIX',
      status: 'accepted',
      detail: expect.any(String),
    });
    expect((await balances(s.ctx.db, m.accountId)).available).toBe(before.available - 300_000);
    await finished(res.body.transaction_id);
    const [completed] = await outbox(s.ctx.db, res.body.transaction_id);
    expect(completed!.event).toBe('pix.refund.completed');
    expect(completed!.payload).toMatchObject({
      status: 'settled',
      transaction_id: res.body.transaction_id,
      end_to_end_id: res.body.end_to_end_id,
      original_transaction_id: original.transaction_id,
      original_end_to_end_id: original.end_to_end_id,
      amount: 300_000,
      original_amount: 1_000_000,
      reason: 'MD06',
      description: 'Devolução PIX',
      total_refunded: 300_000,
      remaining_refundable: 700_000,
      is_partial: true,
      completed_at: expect.stringMatching(/Z$/),
    });

    const rest = await m.client.post('/pix/refund', { original_transaction_id: original.transaction_id, amount: 7000, description: 'Cancelamento do pedido' });
    await finished(rest.body.transaction_id);
    const [second] = await outbox(s.ctx.db, rest.body.transaction_id);
    expect(second!.payload).toMatchObject({ total_refunded: 1_000_000, remaining_refundable: 0, is_partial: true, description: 'Cancelamento do pedido' });

    const read = await m.client.get(`/pix/refund/${rest.body.transaction_id}`);
    expect(read.status).toBe(200);
    expect(read.body).toMatchObject({
      worked: true,
      transaction_id: rest.body.transaction_id,
      end_to_end_id: rest.body.end_to_end_id,
      status: 'settled',
      amount: 700_000,
      total_refunded: 1_000_000,
      remaining_refundable: 0,
      reason_code: null,
    });
    // The refund is readable by its end-to-end id too, and shows in the statement as outbound PIX.
    expect((await m.client.get(`/pix/refund/${rest.body.end_to_end_id}`)).body.transaction_id).toBe(rest.body.transaction_id);
    expect((await m.client.get(`/transactions/${rest.body.transaction_id}`)).body).toMatchObject({ direction: 'outbound', type: 'pix', original_transaction_id: original.transaction_id });
  });

  it('a full refund (amount omitted) returns the whole original amount', async () => {
    const original = await inbound(2500);
    const res = await m.client.post('/pix/refund', { original_transaction_id: original.transaction_id });
    expect(res.body.amount).toBe(250_000);
    await finished(res.body.transaction_id);
    expect((await outbox(s.ctx.db, res.body.transaction_id))[0]!.payload).toMatchObject({ total_refunded: 250_000, remaining_refundable: 0, is_partial: false });
  });

  it('rule 1: an original of another merchant, or none, is 404 as if it did not exist', async () => {
    const other = await merchantWithKey(s);
    const theirs = await inbound(1000, other);
    for (const id of [theirs.transaction_id, theirs.end_to_end_id, 'PIXIN00000000000000NOTHERE00']) {
      const res = await m.client.post('/pix/refund', { original_transaction_id: id });
      expect(res.status).toBe(404);
      expect(res.body).toEqual({ worked: false, errors: { not_found: 'Transaction not found' } });
    }
  });

  it('only a settled PIX received can be refunded (422)', async () => {
    const deposit = (await m.client.get('/transactions?type=internal')).body.data[0];
    const res = await m.client.post('/pix/refund', { original_transaction_id: deposit.transaction_id });
    expect(res.status).toBe(422);
    expect(res.body).toEqual({ worked: false, errors: { unprocessable_entity: 'Only a settled PIX received by the account can be refunded' } });
  });

  it('rule 2: the refunds of one original (settled or in flight) never exceed its amount (422)', async () => {
    const original = await inbound(1000);
    const over = await m.client.post('/pix/refund', { original_transaction_id: original.transaction_id, amount: 1001 });
    expect(over.status).toBe(422);
    expect(over.body).toEqual({ worked: false, errors: { unprocessable_entity: 'refund amount exceeds the original transaction' } });
    expect((await m.client.post('/pix/refund', { original_transaction_id: original.transaction_id, amount: 600 })).status).toBe(202);
    expect((await m.client.post('/pix/refund', { original_transaction_id: original.transaction_id, amount: 401 })).status).toBe(422);
    // Omitted amount = the full original amount, which no longer fits.
    expect((await m.client.post('/pix/refund', { original_transaction_id: original.transaction_id })).status).toBe(422);
    expect((await m.client.post('/pix/refund', { original_transaction_id: original.transaction_id, amount: 400 })).status).toBe(202);
  });

  it('rule 3: the safe balance must cover the refund (422 insufficient balance)', async () => {
    const poor = await merchantWithKey(s);
    const original = await inbound(1000, poor);
    await poor.client.post('/pix/cash-out', { amount: 900, pix_key: await foreignKey(s) });
    const res = await poor.client.post('/pix/refund', { original_transaction_id: original.transaction_id, amount: 101 });
    expect(res.status).toBe(422);
    expect(res.body).toEqual({ worked: false, errors: { unprocessable_entity: 'insufficient balance' } });
    expect((await poor.client.post('/pix/refund', { original_transaction_id: original.transaction_id, amount: 100 })).status).toBe(202);
  });

  it('rule 4: deadlines are not enforced here; a late refund is accepted (202) and fails later with pix.refund.failed', async () => {
    const original = await inbound(1000);
    shift += 91 * DAY_MS;
    try {
      const before = await balances(s.ctx.db, m.accountId);
      const late = await m.client.post('/pix/refund', { original_transaction_id: original.transaction_id, amount: 100 });
      expect(late.status).toBe(202);
      expect(late.body.status).toBe('accepted');
      const row = await finished(late.body.transaction_id);
      expect(row).toMatchObject({ status: 4, payment_status: 'failed' });
      const [failed] = await outbox(s.ctx.db, late.body.transaction_id);
      expect(failed!.event).toBe('pix.refund.failed');
      expect(failed!.payload).toMatchObject({ status: 'failed', reason_code: 'RETURN_DEADLINE_EXCEEDED', reason: 'MD06', total_refunded: 0, remaining_refundable: 100_000 });
      expect(await balances(s.ctx.db, m.accountId)).toEqual(before);
      expect((await m.client.get(`/pix/refund/${late.body.transaction_id}`)).body).toMatchObject({ status: 'failed', reason_code: 'RETURN_DEADLINE_EXCEEDED' });
    } finally {
      shift -= 91 * DAY_MS;
    }
    // Within its deadline, BE08 (80 days) at 75 days goes through; AM09 (30 days) at 31 days does not.
    const fraud = await inbound(1000);
    shift += 75 * DAY_MS;
    try {
      const be08 = await m.client.post('/pix/refund', { original_transaction_id: fraud.transaction_id, amount: 100, reason: 'BE08' });
      expect((await finished(be08.body.transaction_id)).payment_status).toBe('settled');
      const am09 = await m.client.post('/pix/refund', { original_transaction_id: fraud.transaction_id, amount: 100, return_code: 'AM09' });
      expect((await finished(am09.body.transaction_id)).payment_status).toBe('failed');
    } finally {
      shift -= 75 * DAY_MS;
    }
  });

  it('a reason outside MD06, BE08, AM09, SL02, RR04, FR01 is accepted (202) and rejected later with reason_code', async () => {
    const original = await inbound(1000);
    const res = await m.client.post('/pix/refund', { original_transaction_id: original.transaction_id, amount: 100, reason: 'XX99' });
    expect(res.status).toBe(202);
    expect(res.body.reason).toBe('XX99');
    await finished(res.body.transaction_id);
    expect((await outbox(s.ctx.db, res.body.transaction_id))[0]!.payload).toMatchObject({
      event: 'pix.refund.failed',
      status: 'failed',
      reason_code: 'INVALID_RETURN_CODE',
      reason: 'XX99',
    });
    for (const code of ['MD06', 'BE08', 'AM09', 'SL02', 'RR04', 'FR01']) {
      const ok = await m.client.post('/pix/refund', { original_transaction_id: original.transaction_id, amount: 10, reason: code });
      expect((await finished(ok.body.transaction_id)).payment_status, code).toBe('settled');
    }
  });

  it('the id aliases, first found wins: original_transaction_id, original_e2e_id, originalTransactionId, transaction_id, end_to_end_id', async () => {
    const a = await inbound(1000);
    const b = await inbound(1000);
    const refundOf = async (body: Record<string, unknown>, options = {}) => (await m.client.post('/pix/refund', { amount: 1, ...body }, options)).body;
    expect(await refundOf({ original_transaction_id: a.transaction_id, original_e2e_id: b.end_to_end_id })).toMatchObject({ original_transaction_id: a.transaction_id });
    expect(await refundOf({ original_e2e_id: a.end_to_end_id, transaction_id: b.transaction_id })).toMatchObject({ original_transaction_id: a.transaction_id });
    expect(await refundOf({ originalTransactionId: b.transaction_id, transaction_id: a.transaction_id })).toMatchObject({ original_transaction_id: b.transaction_id });
    expect(await refundOf({ transaction_id: b.transaction_id, end_to_end_id: a.end_to_end_id })).toMatchObject({ original_transaction_id: b.transaction_id });
    expect(await refundOf({ end_to_end_id: a.end_to_end_id })).toMatchObject({ original_transaction_id: a.transaction_id });
    // Empty values are not "found".
    expect(await refundOf({ original_transaction_id: '', end_to_end_id: b.end_to_end_id })).toMatchObject({ original_transaction_id: b.transaction_id });
    // Under X-Key-Case: camelCase, originalTransactionId is read as original_transaction_id.
    const camel = await refundOf({ originalTransactionId: a.transaction_id }, { camelCase: true });
    expect(camel).toMatchObject({ worked: true, originalTransactionId: a.transaction_id, status: 'accepted' });

    const none = await m.client.post('/pix/refund', { amount: 1 });
    expect(none.status).toBe(400);
    expect(none.body).toEqual({ worked: false, errors: { bad_request: 'original_transaction_id is required' } });
  });

  it('400 with worked: false for bad fields; needs payment:write (POST) and transfer:read (GET)', async () => {
    const original = await inbound(1000);
    const cases: [Record<string, unknown>, Record<string, string[]>][] = [
      [{ amount: 0 }, { amount: ['must be greater than 0'] }],
      [{ amount: 1.5 }, { amount: ['must be an integer (cents)'] }],
      [{ description: 'x'.repeat(141) }, { description: ['is too long (maximum is 140 characters)'] }],
      [{ reason: 42 }, { reason: ['must be a return code of 1 to 35 characters'] }],
      [{ motivo: 'x' }, { motivo: ['is not a permitted field'] }],
      // An alias the first one outranks is not read, but it must still be a string (the fuzzer's find).
      [{ transaction_id: 1 }, { transaction_id: ['must be a transaction id or an end-to-end id'] }],
      [{ end_to_end_id: { id: 'E1' } }, { end_to_end_id: ['must be a transaction id or an end-to-end id'] }],
    ];
    for (const [extra, fields] of cases) {
      const res = await m.client.post('/pix/refund', { original_transaction_id: original.transaction_id, ...extra });
      expect(res.status).toBe(400);
      expect(res.body).toEqual({ worked: false, errors: { bad_request: fields } });
    }
    const writer = await merchantWithKey(s, { permissions: ['transfer:write', 'account:read'] });
    expect((await writer.client.post('/pix/refund', { original_transaction_id: original.transaction_id })).body).toEqual({
      error: 'forbidden',
      message: 'API key lacks permission: payment:write',
    });
    expect((await writer.client.get('/pix/refund/PIXRET1')).body).toEqual({ error: 'forbidden', message: 'API key lacks permission: transfer:read' });
    const other = await merchantWithKey(s);
    const mine = await m.client.post('/pix/refund', { original_transaction_id: original.transaction_id, amount: 1 });
    const read = await other.client.get(`/pix/refund/${mine.body.transaction_id}`);
    expect(read.status).toBe(404);
    expect(read.body).toEqual({ worked: false, errors: { not_found: 'Refund not found' } });
  });
});

describe.each(BACKENDS)('a refund the rail settles before answering, on %s', (backend) => {
  it('answers 200 settled (never processing) and writes pix.refund.completed in the same step', async () => {
    const s = await startTestServer({ backend, env: { SIM_SETTLEMENT_MS: '0' } });
    try {
      const m = await merchantWithKey(s);
      const original = (await sandbox(s, 'POST', '/pix/inbound', { account_id: m.accountId, amount: 1000 })).body;
      const res = await m.client.post('/pix/refund', { original_transaction_id: original.transaction_id, amount: 400 });
      expect(res.status).toBe(200);
      expect(res.body).toMatchObject({ worked: true, status: 'settled', amount: 40_000 });
      expect((await outbox(s.ctx.db, res.body.transaction_id)).map((e) => e.event)).toEqual(['pix.refund.completed']);
      expect((await m.client.get(`/pix/refund/${res.body.transaction_id}`)).body.status).toBe('settled');
      await expectLedgerConsistent(s.ctx.db);
    } finally {
      await s.close();
    }
  });
});
