import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { crc16, encodeBrCode } from '../src/lib/brcode.js';
import { expireDueCharges } from '../src/pix/cashin/charges.js';
import { railNotificationHandler } from '../src/pix/railEvents.js';
import type { RailNotification } from '../src/rail/rail.js';
import { addPixKey, merchantWithKey, type MerchantFixture } from './helpers/client.js';
import { BACKENDS } from './helpers/db.js';
import { ManualClock, validCpf } from './helpers/fixtures.js';
import { balances, expectLedgerConsistent, foreignKey, outbox, sandbox, txRow } from './helpers/pix.js';
import { startTestServer, type TestServer } from './helpers/server.js';

/**
 * Paying a cash-in charge through the sandbox payer (POST /api/sandbox/pix/pay): the payment
 * travels through the rail with the BR Code's txid and the crediting transaction matches it to the
 * charge (docs/cash-in.md, "Paying a charge").
 */

async function chargeStatus(s: TestServer, transactionId: string): Promise<string> {
  const [row] = await s.ctx.db.query<{ status: string }>(
    'SELECT c.status FROM pix_charges c JOIN transactions t ON t.id = c.transaction_uuid WHERE t.transaction_id = $1',
    [transactionId],
  );
  return row!.status;
}

async function eventCount(s: TestServer, event: string, subject: string): Promise<number> {
  return (await outbox(s.ctx.db, subject)).filter((e) => e.event === event).length;
}

describe.each(BACKENDS)('paying a charge through POST /api/sandbox/pix/pay on %s', (backend) => {
  const clock = new ManualClock(Date.parse('2026-04-02T15:00:00.000Z'));
  let s: TestServer;
  let m: MerchantFixture;
  let key: string;
  beforeAll(async () => {
    // No background workers: the sandbox delivers its own notifications, and the test decides when
    // the expiry sweep runs.
    s = await startTestServer({ backend, clock, workers: false, env: { SIM_SEED: '11' } });
    m = await merchantWithKey(s, { depositCents: 10_000 });
    key = await addPixKey(s, m.accountId, 'evp');
    await s.admin('PATCH', `/accounts/${m.accountId}`, { cash_in_fee_cents: 35 });
  });
  afterAll(async () => {
    if (s) await expectLedgerConsistent(s.ctx.db);
    await s?.close();
  });

  const charge = async (body: Record<string, unknown> = {}) => {
    const res = await m.client.post('/pix/cash-in', { amount: 15_990, ...body });
    expect(res.status).toBe(201);
    return res.body as { transaction_id: string; id: string; txid: string; emv: string; amount: number; expires_at: string };
  };

  it('pays the charge: its own record becomes the inbound credit minus the cash-in fee, status paid, one pix.charge.paid, in the statement with the payer', async () => {
    const c = await charge({ tag: 'mesa-7', external_id: 'pedido-77', description: 'Pedido 77' });
    const before = await balances(s.ctx.db, m.accountId);
    const paid = await sandbox(s, 'POST', '/pix/pay', { emv: c.emv, payer_name: 'Rita Pagadora', payer_document: '52998224725', payer_ispb: '00360305' });
    expect(paid).toEqual({
      status: 201,
      body: {
        transaction_id: c.transaction_id,
        end_to_end_id: expect.stringMatching(/^E00360305202604021500[A-Z0-9]{11}$/),
        amount: 1_599_000,
        fee_amount: 3500,
        net_amount: 1_595_500,
        txid: c.txid,
        charge: { transaction_id: c.transaction_id, status: 'paid' },
        payer: { name: 'Rita Pagadora', document: '52998224725', ispb: '00360305', bank_name: 'Caixa Econômica Federal' },
      },
    });
    const e2e = paid.body.end_to_end_id;
    expect(await balances(s.ctx.db, m.accountId)).toEqual({ ...before, available: before.available + 1_595_500 });
    expect(await chargeStatus(s, c.transaction_id)).toBe('paid');

    // One record: the charge's own, completed; no PIXIN beside it.
    const row = await txRow(s.ctx.db, c.transaction_id);
    expect(row).toMatchObject({
      kind: 'charge',
      direction: 'inbound',
      status: 1,
      end_to_end_id: e2e,
      amount: 1_599_000,
      fee_amount: 3500,
      counterparty_name: 'Rita Pagadora',
      payer_document: '52998224725',
      payer_ispb: '00360305',
      payer_bank_name: 'Caixa Econômica Federal',
      tag: 'mesa-7',
      external_id: 'pedido-77',
      created_at: clock.now(),
      completed_at: clock.now(),
    });
    const [{ n }] = (await s.ctx.db.query<{ n: number }>('SELECT count(*)::bigint AS n FROM transactions WHERE end_to_end_id = $1', [e2e])) as [{ n: number }];
    expect(n).toBe(1);
    const ledger = await s.ctx.db.query<{ kind: string; code: string; amount: number }>(
      `SELECT lt.kind, la.code, e.amount FROM ledger_transactions lt JOIN ledger_entries e ON e.ledger_transaction_id = lt.id
         JOIN ledger_accounts la ON la.id = e.ledger_account_id WHERE lt.reference = $1 ORDER BY e.id`,
      [c.transaction_id],
    );
    expect(ledger).toEqual([
      { kind: 'pix_in', code: 'institution:central_bank', amount: -1_599_000 },
      { kind: 'pix_in', code: `account:${m.accountId}:available`, amount: 1_595_500 },
      { kind: 'pix_in', code: 'institution:fees', amount: 3500 },
    ]);

    const events = await outbox(s.ctx.db, c.transaction_id);
    expect(events.map((e) => e.event)).toEqual(['pix.charge.created', 'pix.charge.paid']);
    expect(events[1]!.payload).toEqual({
      event: 'pix.charge.paid',
      status: 'paid',
      transaction_id: c.transaction_id,
      txid: c.txid,
      end_to_end_id: e2e,
      account_id: m.accountId,
      direction: 'credit',
      amount: 1_599_000,
      fee_amount: 3500,
      net_amount: 1_595_500,
      payer: { name: 'Rita Pagadora', document: '52998224725', ispb: '00360305', bank_name: 'Caixa Econômica Federal' },
      description: null,
      expires_at: c.expires_at,
      tag: 'mesa-7',
      external_id: 'pedido-77',
      paid_at: clock.now().toISOString(),
    });

    const item = (await m.client.get('/statement')).body.data.find((d: any) => d.transaction_id === c.transaction_id);
    expect(item).toEqual({
      id: c.id,
      transaction_id: c.transaction_id,
      end_to_end_id: e2e,
      external_id: 'pedido-77',
      type: 'pix',
      status: 'completed',
      payment_status: null,
      amount: 1_599_000,
      fee_amount: 3500,
      net_amount: 1_595_500,
      description: 'Pedido 77',
      direction: 'inbound',
      counterparty_name: 'Rita Pagadora',
      recipient_key: null,
      payer_document: '52998224725',
      recipient_document: null,
      payer_ispb: '00360305',
      payer_bank_name: 'Caixa Econômica Federal',
      created_at: clock.now().toISOString(),
      completed_at: clock.now().toISOString(),
    });
    // The lookups and the charge's receipt agree.
    expect((await m.client.get(`/transactions/ref/pedido-77`)).body).toMatchObject({ transaction_id: c.transaction_id, status: 'completed', end_to_end_id: e2e });
    const receipt = await m.client.get(`/transactions/${c.transaction_id}/receipt`);
    expect(receipt.status).toBe(200);
    expect(receipt.body.payer).toEqual({ name: 'Rita Pagadora', document: '52998224725', ispb: '00360305', bank_name: 'Caixa Econômica Federal', pix_key: null });

    // Paying it again: refused by the payer's bank, nothing moves, still one pix.charge.paid.
    const again = await sandbox(s, 'POST', '/pix/pay', { emv: c.emv });
    expect(again).toEqual({ status: 409, body: { errors: { conflict: `The charge ${c.transaction_id} was already paid at ${clock.now().toISOString()}` } } });
    expect(await balances(s.ctx.db, m.accountId)).toEqual({ ...before, available: before.available + 1_595_500 });
    expect(await eventCount(s, 'pix.charge.paid', c.transaction_id)).toBe(1);
  });

  it('without payer fields the payer is drawn from the seeded generator', async () => {
    const c = await charge({ amount: 100 });
    const paid = await sandbox(s, 'POST', '/pix/pay', { emv: c.emv });
    expect(paid.status).toBe(201);
    expect(paid.body.payer).toEqual({ name: expect.stringMatching(/^\S+ \S+ \S+$/), document: expect.stringMatching(/^\d{11}$/), ispb: expect.stringMatching(/^\d{8}$/), bank_name: expect.any(String) });
    expect(await chargeStatus(s, c.transaction_id)).toBe('paid');
  });

  it('amount may repeat the code’s fixed amount; another amount is 422 and nothing moves', async () => {
    const c = await charge({ amount: 2500 });
    const before = await balances(s.ctx.db, m.accountId);
    expect(await sandbox(s, 'POST', '/pix/pay', { emv: c.emv, amount: 2499 })).toEqual({
      status: 422,
      body: { errors: { unprocessable_entity: 'amount differs from the amount of the BR Code (2500 cents)' } },
    });
    expect(await balances(s.ctx.db, m.accountId)).toEqual(before);
    expect(await chargeStatus(s, c.transaction_id)).toBe('created');
    const ok = await sandbox(s, 'POST', '/pix/pay', { emv: c.emv, amount: 2500 });
    expect(ok.status).toBe(201);
    expect(ok.body.charge).toEqual({ transaction_id: c.transaction_id, status: 'paid' });
  });

  it('an expired charge is refused (409), before and after the sweep; nothing moves', async () => {
    const c = await charge({ expires_in: 60 });
    const before = await balances(s.ctx.db, m.accountId);
    clock.advance(60_000); // at the deadline: no longer payable, not swept yet
    const expected = { status: 409, body: { errors: { conflict: `The charge ${c.transaction_id} expired at ${c.expires_at}` } } };
    expect(await sandbox(s, 'POST', '/pix/pay', { emv: c.emv })).toEqual(expected);
    expect(await expireDueCharges(s.ctx.db, s.ctx.clock)).toBeGreaterThanOrEqual(1);
    expect(await chargeStatus(s, c.transaction_id)).toBe('expired');
    expect(await sandbox(s, 'POST', '/pix/pay', { emv: c.emv })).toEqual(expected);
    expect(await balances(s.ctx.db, m.accountId)).toEqual(before);
    expect(await eventCount(s, 'pix.charge.paid', c.transaction_id)).toBe(0);
  });

  it('refuses what a payer’s app refuses: a bad or dynamic code, a malformed, unknown or foreign key; bad bodies are 400', async () => {
    const c = await charge();
    const tampered = c.emv.slice(0, -4) + (c.emv.endsWith('0000') ? '0001' : '0000');
    const code = (k: string, extra: { amountCents?: number; txid?: string } = {}) => encodeBrCode({ key: k, merchantName: 'Outra Loja', merchantCity: 'RECIFE', ...extra });
    const cases: [unknown, number, unknown][] = [
      [{ emv: tampered }, 422, { unprocessable_entity: 'Invalid EMV payload: CRC does not match' }],
      [{ emv: 'not a code at all, definitely not one' }, 422, { unprocessable_entity: 'Invalid EMV payload: field 63 (CRC) must be last' }],
      [{ emv: encodeBrCode({ url: 'pix.example.com/qr/v2/abc', merchantName: 'Loja', merchantCity: 'RIO', amountCents: 100 }) }, 422, { unprocessable_entity: 'Invalid EMV payload: the location of this dynamic BR Code shows no charge of this institution' }],
      [{ emv: code('not-a-key', { amountCents: 100 }) }, 422, { unprocessable_entity: 'Invalid PIX key format' }],
      [{ emv: code('ninguem@example.com', { amountCents: 100 }) }, 422, { unprocessable_entity: 'The PIX key of the BR Code is not registered in the directory' }],
      [{ emv: code(await foreignKey(s), { amountCents: 100 }) }, 422, { unprocessable_entity: 'The PIX key of the BR Code belongs to another institution (ISPB 18236120); the sandbox pays accounts of this institution only' }],
      [{ emv: code(key) }, 400, { bad_request: { amount: ['is required when the BR Code has no amount'] } }],
      [{}, 400, { bad_request: { emv: ['is required'] } }],
      [{ emv: c.emv, amount: 0, payer_ispb: '1', tip: 5 }, 400, { bad_request: { amount: ['must be greater than or equal to 1'], payer_ispb: ['must be 8 digits'], tip: ['is not a permitted field'] } }],
    ];
    const before = await balances(s.ctx.db, m.accountId);
    for (const [body, status, errors] of cases) {
      expect(await sandbox(s, 'POST', '/pix/pay', body), JSON.stringify(body)).toEqual({ status, body: { errors } });
    }
    expect(await balances(s.ctx.db, m.accountId)).toEqual(before);
    expect(await chargeStatus(s, c.transaction_id)).toBe('created');
    expect(crc16(c.emv.slice(0, -4))).toBe(c.emv.slice(-4));
  });

  it('a static code on the merchant’s key without a charge (no txid, or a txid of no charge) is credited as a plain PIX', async () => {
    const before = await balances(s.ctx.db, m.accountId);
    const open = encodeBrCode({ key, merchantName: 'Loja Teste', merchantCity: 'SAO PAULO' });
    const paid = await sandbox(s, 'POST', '/pix/pay', { emv: open, amount: 700 });
    expect(paid.status).toBe(201);
    expect(paid.body).toMatchObject({ transaction_id: expect.stringMatching(/^PIXIN/), amount: 70_000, fee_amount: 3500, txid: null, charge: null });
    const unknown = await sandbox(s, 'POST', '/pix/pay', { emv: encodeBrCode({ key, merchantName: 'Loja', merchantCity: 'SP', amountCents: 300, txid: 'NOSUCHCHARGE1' }) });
    expect(unknown.status).toBe(201);
    expect(unknown.body).toMatchObject({ transaction_id: expect.stringMatching(/^PIXIN/), txid: 'NOSUCHCHARGE1', charge: null });
    expect(await txRow(s.ctx.db, unknown.body.transaction_id)).toMatchObject({ metadata: { txid: 'NOSUCHCHARGE1' }, charge_unmatched_reason: 'unknown_txid' });
    expect((await balances(s.ctx.db, m.accountId)).available).toBe(before.available + 70_000 - 3500 + 30_000 - 3500);
    expect((await outbox(s.ctx.db, unknown.body.transaction_id)).map((e) => [e.event, e.payload.txid])).toEqual([['pix.charge.paid', 'NOSUCHCHARGE1']]);
  });

  describe('payments the rail delivers that do not pay their charge are credited as plain PIX; the charge is left alone', () => {
    const inbound = (over: Partial<Extract<RailNotification, { kind: 'inbound.payment' }>> & { id: string; endToEndId: string }): RailNotification => ({
      at: clock.now(),
      kind: 'inbound.payment',
      amount: 1_599_000,
      receiverAccountId: m.accountId,
      payer: { name: 'Outro Pagador', document: validCpf(), ispb: '60746948' },
      description: null,
      txid: null,
      receivedAt: clock.now(),
      ...over,
    });
    const e2e = (n: number) => `E60746948202604021500TESTPAY${String(n).padStart(4, '0')}`;

    it('a second payment of a paid charge, a wrong amount, a charge of another account; a charge past its deadline is expired then', async () => {
      const handler = railNotificationHandler(s.ctx);
      const paidCharge = await charge({ amount: 4000 });
      expect((await sandbox(s, 'POST', '/pix/pay', { emv: paidCharge.emv })).status).toBe(201);
      const open = await charge({ amount: 4000 });
      const other = await merchantWithKey(s);
      await addPixKey(s, other.accountId, 'evp');
      const theirs = (await other.client.post('/pix/cash-in', { amount: 4000 })).body;
      const late = await charge({ amount: 4000, expires_in: 60 });

      const before = await balances(s.ctx.db, m.accountId);
      await handler(inbound({ id: 'test:pay:1', endToEndId: e2e(1), amount: 400_000, txid: paidCharge.txid }));
      await handler(inbound({ id: 'test:pay:2', endToEndId: e2e(2), amount: 399_900, txid: open.txid }));
      await handler(inbound({ id: 'test:pay:3', endToEndId: e2e(3), amount: 400_000, txid: theirs.txid }));
      clock.advance(60_000);
      await handler(inbound({ id: 'test:pay:4', endToEndId: e2e(4), amount: 400_000, txid: late.txid, at: clock.now(), receivedAt: clock.now() }));

      const reasons = [];
      for (let i = 1; i <= 4; i++) {
        const [row] = await s.ctx.db.query<{ kind: string; charge_unmatched_reason: string | null }>('SELECT kind, charge_unmatched_reason FROM transactions WHERE end_to_end_id = $1', [e2e(i)]);
        reasons.push([row!.kind, row!.charge_unmatched_reason]);
      }
      expect(reasons).toEqual([
        ['pix_in', 'paid'],
        ['pix_in', 'amount_mismatch'],
        ['pix_in', 'other_account'],
        ['pix_in', 'expired'],
      ]);
      expect((await balances(s.ctx.db, m.accountId)).available).toBe(before.available + 400_000 + 399_900 + 400_000 + 400_000 - 4 * 3500);
      expect(await chargeStatus(s, paidCharge.transaction_id)).toBe('paid');
      expect(await chargeStatus(s, open.transaction_id)).toBe('created');
      expect(await chargeStatus(s, theirs.transaction_id)).toBe('created');
      expect(await chargeStatus(s, late.transaction_id)).toBe('expired');
      expect((await outbox(s.ctx.db, late.transaction_id)).map((e) => e.event)).toEqual(['pix.charge.created', 'pix.charge.expired']);
      expect(await eventCount(s, 'pix.charge.paid', paidCharge.transaction_id)).toBe(1);
      expect(await eventCount(s, 'pix.charge.paid', theirs.transaction_id)).toBe(0);
    });

    it('a redelivered payment notification pays the charge once', async () => {
      const handler = railNotificationHandler(s.ctx);
      const c = await charge({ amount: 1200 });
      const before = await balances(s.ctx.db, m.accountId);
      const n = inbound({ id: 'test:pay:redelivered', endToEndId: e2e(9), amount: 120_000, txid: c.txid });
      await Promise.all([handler(n), handler(n)]);
      await handler({ ...n, id: 'test:pay:redelivered-under-another-id' });
      expect(await chargeStatus(s, c.transaction_id)).toBe('paid');
      expect((await balances(s.ctx.db, m.accountId)).available).toBe(before.available + 120_000 - 3500);
      expect(await eventCount(s, 'pix.charge.paid', c.transaction_id)).toBe(1);
      const [{ n: rows }] = (await s.ctx.db.query<{ n: number }>('SELECT count(*)::bigint AS n FROM ledger_transactions WHERE reference = $1', [c.transaction_id])) as [{ n: number }];
      expect(rows).toBe(1);
    });
  });

  it('a paid charge can be refunded like any PIX received', async () => {
    const c = await charge({ amount: 5000 });
    expect((await sandbox(s, 'POST', '/pix/pay', { emv: c.emv })).status).toBe(201);
    const refund = await m.client.post('/pix/refund', { original_transaction_id: c.transaction_id, amount: 2000 });
    expect(refund.status).toBe(202);
    expect(refund.body).toMatchObject({ original_transaction_id: c.transaction_id, amount: 200_000, status: 'accepted' });
  });
});
