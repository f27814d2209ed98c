import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { maskDocument, normalizeCode, signedReceipt, verifyReceipt } from '../../src/transactions/receipts.js';
import { merchantWithKey, type MerchantFixture } from '../helpers/client.js';
import { BACKENDS } from '../helpers/db.js';
import { sandbox, SIM_FAST } from '../helpers/pix.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

/** Receipts and their authenticity codes (src/transactions/receipts.ts), on both backends. */
describe.each(BACKENDS)('receipts on %s', (backend) => {
  let s: TestServer;
  let a: MerchantFixture;
  let pixIn: string;

  beforeAll(async () => {
    s = await startTestServer({ backend, env: SIM_FAST, workers: false });
    a = await merchantWithKey(s, { name: 'Loja A', depositCents: 10_000 });
    const r = await sandbox(s, 'POST', '/pix/inbound', { account_id: a.accountId, amount: 2_345, payer_name: 'Maria Pagadora' });
    expect(r.status).toBe(201);
    pixIn = r.body.transaction_id;
  });
  afterAll(async () => {
    await s?.close();
  });

  it('signs a settled PIX once under one key made on first use, even when asked for at once', async () => {
    const [x, y] = await Promise.all([signedReceipt(s.ctx, a.accountId, pixIn), signedReceipt(s.ctx, a.accountId, pixIn)]);
    expect(x.authenticity_code).toBe(y.authenticity_code);
    expect(x).toMatchObject({ transaction_id: pixIn, amount: 2_345 * 100, direction: 'inbound', receiver: { name: 'Loja A' }, payer: { name: 'Maria Pagadora' } });
    expect((await s.ctx.db.query('SELECT id FROM receipt_keys')).length).toBe(1);
    // the same code after a restart of the process (the key is in the database)
    expect((await signedReceipt(s.ctx, a.accountId, x.end_to_end_id)).authenticity_code).toBe(x.authenticity_code);
  });

  it('verifies the code of its end-to-end id only; any change is invalid', async () => {
    const r = await signedReceipt(s.ctx, a.accountId, pixIn);
    expect(await verifyReceipt(s.ctx, r.end_to_end_id, r.authenticity_code)).toEqual(r);
    const flip = (c: string) => c.slice(0, -1) + (c.endsWith('0') ? '1' : '0');
    expect(await verifyReceipt(s.ctx, r.end_to_end_id, flip(r.authenticity_code))).toBeNull();
    expect(await verifyReceipt(s.ctx, flip(r.end_to_end_id), r.authenticity_code)).toBeNull();
    expect(await verifyReceipt(s.ctx, r.end_to_end_id, 'garbage')).toBeNull();
    // a field of the payment changed in the database: the printed code no longer verifies
    await s.ctx.db.query('UPDATE transactions SET counterparty_name = $2 WHERE transaction_id = $1', [pixIn, 'Someone Else']);
    expect(await verifyReceipt(s.ctx, r.end_to_end_id, r.authenticity_code)).toBeNull();
    await s.ctx.db.query('UPDATE transactions SET counterparty_name = $2 WHERE transaction_id = $1', [pixIn, 'Maria Pagadora']);
    expect(await verifyReceipt(s.ctx, r.end_to_end_id, r.authenticity_code)).not.toBeNull();
  });

  it('refuses what is not a settled PIX of the account', async () => {
    const [deposit] = await s.ctx.db.query<{ t: string }>(`SELECT transaction_id AS t FROM transactions WHERE account_id = $1 AND type = 'internal'`, [a.accountId]);
    await expect(signedReceipt(s.ctx, a.accountId, deposit!.t)).rejects.toMatchObject({ code: 'unprocessable_entity' });
    await expect(signedReceipt(s.ctx, a.accountId + 1, pixIn)).rejects.toMatchObject({ code: 'not_found' });
  });
});

describe('receipt helpers', () => {
  it('masks a CPF, formats a CNPJ, and reads a code as typed', () => {
    expect(maskDocument('12345678909')).toBe('***.456.789-**');
    expect(maskDocument('11222333000181')).toBe('11.222.333/0001-81');
    expect(maskDocument(null)).toBeNull();
    expect(normalizeCode('1-abcd-efgh-jkmn-pqrs')).toBe('1-ABCD-EFGH-JKMN-PQRS');
    expect(normalizeCode('1abcdefghjkmnpqrs')).toBe('1-ABCD-EFGH-JKMN-PQRS');
    expect(normalizeCode('1-OOOO-IIII-LLLL-0000')).toBe('1-0000-1111-1111-0000');
    expect(normalizeCode('1-ABCD-EFGH-JKMN-PQRU')).toBeNull(); // U is not in the alphabet
    expect(normalizeCode('0-ABCD-EFGH-JKMN-PQRS')).toBeNull();
    expect(normalizeCode(undefined)).toBeNull();
  });
});
