import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openBooks } from '../../src/ledger/ledger.js';
import { insertAccount } from '../../src/merchants/repository.js';
import { addPixKey, merchantWithKey, type MerchantFixture } from '../helpers/client.js';
import { BACKENDS } from '../helpers/db.js';
import { balances, eventNames, expectLedgerConsistent, foreignKey, outbox, sandbox, SIM_FAST, txRow } from '../helpers/pix.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

/** A second account of a merchant (operators open them; no API route yet). */
async function secondAccount(s: TestServer, merchantId: number): Promise<number> {
  return s.ctx.db.transaction(async (tx) => {
    const account = await insertAccount(tx, merchantId);
    await openBooks(tx, account.id);
    return account.id;
  });
}

describe.each(BACKENDS)('TEF: POST /api/external/tef/transfers on %s', (backend) => {
  let s: TestServer;
  let a: MerchantFixture;
  let b: MerchantFixture;
  let bKey: string;

  beforeAll(async () => {
    s = await startTestServer({ backend, env: SIM_FAST, workers: false });
    a = await merchantWithKey(s, { depositCents: 100_000, name: 'Loja A' });
    b = await merchantWithKey(s, { name: 'Loja B' });
    bKey = await addPixKey(s, b.accountId, 'evp');
  });
  afterAll(async () => {
    await s?.close();
  });

  it('moves money to another merchant by its PIX key: both balances, internal statement rows, sent and received events', async () => {
    const before = [await balances(s.ctx.db, a.accountId), await balances(s.ctx.db, b.accountId)];
    const res = await a.client.post('/tef/transfers', { amount: 2500, pix_key: bKey, description: 'aluguel', external_id: 'tef-1' });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ worked: true, final: true, status: 'settled', amount: 250_000, fee_amount: 0, net_amount: 250_000, external_id: 'tef-1', from_account_id: a.accountId, to_account_id: null });
    expect(res.body.recipient.name).toBe('Loja B');
    expect(res.body.transaction_id).toMatch(/^TEF\d{14}[A-Z0-9]{10}$/);
    expect((await balances(s.ctx.db, a.accountId)).available).toBe(before[0]!.available - 250_000);
    expect((await balances(s.ctx.db, b.accountId)).available).toBe(before[1]!.available + 250_000);

    const src = await txRow(s.ctx.db, res.body.transaction_id);
    expect(src).toMatchObject({ type: 'internal', direction: 'outbound', kind: 'tef_out', statement_status: 'settled' });
    expect(await eventNames(s.ctx.db, res.body.transaction_id)).toEqual(['tef.transfer.sent']);
    const [received] = await s.ctx.db.query<{ transaction_id: string }>(`SELECT transaction_id FROM transactions WHERE account_id = $1 AND kind = 'tef_in'`, [b.accountId]);
    const dst = await txRow(s.ctx.db, received!.transaction_id);
    expect(dst).toMatchObject({ type: 'internal', direction: 'inbound', counterparty_name: 'Loja A', statement_status: 'settled' });
    const [ev] = await outbox(s.ctx.db, received!.transaction_id);
    expect(ev!.event).toBe('tef.transfer.received');
    expect(ev!.payload).toMatchObject({ status: 'settled', direction: 'credit', amount: 250_000, tef_transaction_id: res.body.transaction_id });
    expect(ev!.merchant_id).toBe(b.merchantId);

    // Both statements show it as internal.
    const stA = await a.client.get('/statement?type=internal');
    expect(stA.body.data.some((i: any) => i.transaction_id === res.body.transaction_id && i.direction === 'outbound' && i.status === 'completed')).toBe(true);
    const stB = await b.client.get('/statement?type=internal');
    expect(stB.body.data.some((i: any) => i.transaction_id === received!.transaction_id && i.direction === 'inbound')).toBe(true);
    await expectLedgerConsistent(s.ctx.db);
  });

  it('is idempotent by external_id (same body: the original answer; other body: 409) and by Idempotency-Key', async () => {
    const body = { amount: 100, pix_key: bKey, external_id: 'tef-idem' };
    const first = await a.client.post('/tef/transfers', body);
    expect(first.status).toBe(200);
    const again = await a.client.post('/tef/transfers', body);
    expect(again.status).toBe(200);
    expect(again.body.transaction_id).toBe(first.body.transaction_id);
    const other = await a.client.post('/tef/transfers', { ...body, amount: 101 });
    expect(other.status).toBe(409);
    expect(other.body.code).toBe('external_id_conflict');

    const k1 = await a.client.post('/tef/transfers', { amount: 100, pix_key: bKey }, { idempotencyKey: 'tef-idem-key-1' });
    const k2 = await a.client.post('/tef/transfers', { amount: 100, pix_key: bKey }, { idempotencyKey: 'tef-idem-key-1' });
    expect(k2.headers.get('x-idempotent-replay')).toBe('true');
    expect(k2.body.transaction_id).toBe(k1.body.transaction_id);
    const [n] = await s.ctx.db.query<{ n: number }>(`SELECT count(*)::bigint AS n FROM transactions WHERE account_id = $1 AND kind = 'tef_out' AND status = 1`, [a.accountId]);
    expect(n!.n).toBe(3);
  });

  it("moves money between a merchant's own accounts by account id", async () => {
    const second = await secondAccount(s, a.merchantId);
    const res = await a.client.post('/tef/transfers', { amount: 1000, account_id: second });
    expect(res.status).toBe(200);
    expect(res.body.to_account_id).toBe(second);
    expect((await balances(s.ctx.db, second)).available).toBe(100_000);
  });

  it("refuses another merchant's account id, the same account, foreign and unknown keys, and bad bodies", async () => {
    const cases: [unknown, number, string][] = [
      [{ amount: 100, account_id: b.accountId }, 422, 'destination_not_found'],
      [{ amount: 100, account_id: a.accountId }, 422, 'same_account'],
      [{ amount: 100, pix_key: await foreignKey(s) }, 422, 'destination_not_found'],
      [{ amount: 100, pix_key: 'nobody@example.com' }, 422, 'destination_not_found'],
      [{ amount: 0, pix_key: bKey }, 422, 'invalid_amount'],
      [{ amount: 1.5, pix_key: bKey }, 422, 'invalid_amount'],
      [{ amount: 100 }, 400, 'bad_request'],
      [{ amount: 100, pix_key: bKey, account_id: 1 }, 400, 'bad_request'],
      [{ amount: 100, pix_key: bKey, extra: 1 }, 400, 'bad_request'],
    ];
    for (const [body, status, code] of cases) {
      const res = await a.client.post('/tef/transfers', body);
      expect({ body, status: res.status, code: res.body.code }).toEqual({ body, status, code });
    }
  });

  it('needs transfer:write and a signature', async () => {
    const reader = await merchantWithKey(s, { permissions: ['account:read'] });
    expect((await reader.client.post('/tef/transfers', { amount: 100, pix_key: bKey })).status).toBe(403);
    expect((await a.client.post('/tef/transfers', { amount: 100, pix_key: bKey }, { sign: false })).status).toBe(401);
  });

  it('records a failed transfer with tef.transfer.failed when the balance is short or the destination inactive; nothing moves', async () => {
    const poor = await merchantWithKey(s, { depositCents: 50 });
    const before = await balances(s.ctx.db, b.accountId);
    const short = await poor.client.post('/tef/transfers', { amount: 51, pix_key: bKey, external_id: 'tef-short' });
    // One status per code (the cash-out's, the spec's): 400.
    expect(short.status).toBe(400);
    expect(short.body).toMatchObject({
      worked: false,
      final: true,
      status: 'failed',
      code: 'insufficient_balance',
      errors: { insufficient_balance: 'Balance below the amount; the transfer failed' },
    });
    expect(await eventNames(s.ctx.db, short.body.transaction_id)).toEqual(['tef.transfer.failed']);
    expect(await txRow(s.ctx.db, short.body.transaction_id)).toMatchObject({ statement_status: 'failed', type: 'internal' });
    // a repeat answers the same failure
    const again = await poor.client.post('/tef/transfers', { amount: 51, pix_key: bKey, external_id: 'tef-short' });
    expect(again.status).toBe(400);
    expect(again.body.transaction_id).toBe(short.body.transaction_id);

    expect((await s.admin('PATCH', `/accounts/${b.accountId}`, { status: 'inactive' })).status).toBe(200);
    const inactive = await a.client.post('/tef/transfers', { amount: 10, pix_key: bKey });
    expect(inactive.status).toBe(422);
    expect(inactive.body.code).toBe('destination_inactive');
    expect(await eventNames(s.ctx.db, inactive.body.transaction_id)).toEqual(['tef.transfer.failed']);
    expect(await balances(s.ctx.db, b.accountId)).toEqual(before);
    expect((await s.admin('PATCH', `/accounts/${b.accountId}`, { status: 'active' })).status).toBe(200);
    await expectLedgerConsistent(s.ctx.db);
  });

  it('checks the cash-out limits of the source', async () => {
    expect((await s.admin('PATCH', `/accounts/${a.accountId}`, { cash_out_max_amount_cents: 500 })).status).toBe(200);
    const res = await a.client.post('/tef/transfers', { amount: 501, pix_key: bKey });
    expect(res.status).toBe(422);
    expect(res.body.code).toBe('amount_limit_exceeded');
    expect((await s.admin('PATCH', `/accounts/${a.accountId}`, { cash_out_max_amount_cents: 100_000_000 })).status).toBe(200);
  });

  it('a credit by TEF tops up a short MED block on the destination', async () => {
    const c = await merchantWithKey(s, { name: 'Loja C' });
    const cKey = await addPixKey(s, c.accountId, 'evp');
    const pix = await sandbox(s, 'POST', '/pix/inbound', { account_id: c.accountId, amount: 1000 });
    expect(pix.status).toBe(201);
    // spend it, then an infraction claims the PIX: the block is short
    await s.ctx.db.transaction(async (tx) => {
      const { post } = await import('../../src/ledger/ledger.js');
      await post(tx, { kind: 'test_drain', reference: 't', postings: [{ book: { accountId: c.accountId, book: 'available' }, amount: -100_000 }, { book: 'institution:funding', amount: 100_000 }] });
    });
    const inf = await sandbox(s, 'POST', '/infractions', { end_to_end_id: pix.body.end_to_end_id, amount: 1000 });
    expect(inf.status).toBe(201);
    expect((await balances(s.ctx.db, c.accountId)).blocked).toBe(0);
    const res = await a.client.post('/tef/transfers', { amount: 600, pix_key: cKey });
    expect(res.status).toBe(200);
    expect(await balances(s.ctx.db, c.accountId)).toMatchObject({ available: 0, blocked: 60_000 });
    await expectLedgerConsistent(s.ctx.db);
  });

  it('the operator can make a TEF with POST /api/admin/tef/transfers', async () => {
    const res = await s.admin('POST', '/tef/transfers', { from_account_id: a.accountId, amount: 300, pix_key: bKey, external_id: 'adm-1' });
    expect(res.status).toBe(200);
    expect(res.body.status).toBe('settled');
    expect((await s.admin('POST', '/tef/transfers', { amount: 300, pix_key: bKey })).status).toBe(400);
  });

  it('refuses an operator TEF out of an inactive account (or merchant): nothing recorded, nothing moves', async () => {
    const before = await balances(s.ctx.db, a.accountId);
    const outs = async () => (await s.ctx.db.query(`SELECT 1 FROM transactions WHERE account_id = $1 AND kind = 'tef_out'`, [a.accountId])).length;
    const n = await outs();
    expect((await s.admin('PATCH', `/accounts/${a.accountId}`, { status: 'inactive' })).status).toBe(200);
    try {
      const res = await s.admin('POST', '/tef/transfers', { from_account_id: a.accountId, amount: 300, pix_key: bKey, external_id: 'adm-inactive' });
      expect(res.status).toBe(422);
      expect(res.body).toEqual({ worked: false, errors: { account_inactive: 'Account is not active' }, code: 'account_inactive', detail: 'Account is not active' });
    } finally {
      expect((await s.admin('PATCH', `/accounts/${a.accountId}`, { status: 'active' })).status).toBe(200);
    }
    await s.ctx.db.query(`UPDATE merchants SET status = 'inactive' WHERE id = $1`, [a.merchantId]);
    try {
      const res = await s.admin('POST', '/tef/transfers', { from_account_id: a.accountId, amount: 300, pix_key: bKey });
      expect(res.status).toBe(422);
      expect(res.body.code).toBe('account_inactive');
    } finally {
      await s.ctx.db.query(`UPDATE merchants SET status = 'active' WHERE id = $1`, [a.merchantId]);
    }
    expect(await balances(s.ctx.db, a.accountId)).toEqual(before);
    expect(await outs()).toBe(n);
  });

  it("a TEF into an account near the maximum balance fails in TEF's shape and says nothing of the destination's balance", async () => {
    const rich = await merchantWithKey(s, { name: 'Loja Rica' });
    const richKey = await addPixKey(s, rich.accountId, 'evp');
    await s.ctx.db.transaction(async (tx) => {
      const { post } = await import('../../src/ledger/ledger.js');
      const { MAX_BALANCE_BASE_UNITS } = await import('../../src/lib/money.js');
      await post(tx, { kind: 'test_fill', reference: 't', postings: [{ book: { accountId: rich.accountId, book: 'available' }, amount: MAX_BALANCE_BASE_UNITS - 50_000 }, { book: 'institution:funding', amount: -(MAX_BALANCE_BASE_UNITS - 50_000) }] });
    });
    const before = [await balances(s.ctx.db, a.accountId), await balances(s.ctx.db, rich.accountId)];
    const res = await a.client.post('/tef/transfers', { amount: 600, pix_key: richKey, external_id: 'tef-full' });
    expect(res.status).toBe(422);
    expect(res.body).toMatchObject({
      worked: false,
      final: true,
      status: 'failed',
      code: 'destination_cannot_receive',
      errors: { destination_cannot_receive: 'The destination account cannot receive this transfer; the transfer failed' },
      amount: 60_000,
    });
    expect(res.text).not.toMatch(/maxim|balance|limit/i);
    expect(res.text).not.toContain(String(before[1]!.available).slice(0, 6)); // no figure of the destination's
    expect(await eventNames(s.ctx.db, res.body.transaction_id)).toEqual(['tef.transfer.failed']);
    const [failed] = await outbox(s.ctx.db, res.body.transaction_id);
    expect(failed!.payload).toMatchObject({ reason_code: 'destination_cannot_receive' });
    expect(JSON.stringify(failed!.payload)).not.toMatch(/maxim|balance/i);
    // a repeat answers the same failure; nothing moved on either side
    const again = await a.client.post('/tef/transfers', { amount: 600, pix_key: richKey, external_id: 'tef-full' });
    expect(again.body.transaction_id).toBe(res.body.transaction_id);
    expect([await balances(s.ctx.db, a.accountId), await balances(s.ctx.db, rich.accountId)]).toEqual(before);
    // what fits still goes through
    expect((await a.client.post('/tef/transfers', { amount: 500, pix_key: richKey })).status).toBe(200);
    await expectLedgerConsistent(s.ctx.db);
  });

  it('the cash-out errors for keys of this institution name the TEF route', async () => {
    const res = await a.client.post('/pix/cash-out', { amount: 100, pix_key: bKey });
    expect(res.status).toBe(422);
    expect(res.body.code).toBe('same_institution_transfer');
    expect(res.body.detail).toContain('POST /api/external/tef/transfers');
  });
});
