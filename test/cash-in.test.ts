import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { decodeBrCode } from '../src/lib/brcode.js';
import { MAX_AMOUNT_CENTS } from '../src/lib/money.js';
import { CHARGE } from '../src/pix/cashin/charges.js';
import { insertTransaction, TX_STATUS } from '../src/transactions/records.js';
import { addPixKey, merchantWithKey, type MerchantFixture } from './helpers/client.js';
import { BACKENDS } from './helpers/db.js';
import { crcCcittFalse, emvFields } from './helpers/emv.js';
import { ManualClock } from './helpers/fixtures.js';
import { expectQrImageOf } from './helpers/png.js';
import { startTestServer, type TestServer } from './helpers/server.js';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

async function outbox(s: TestServer, subject: string) {
  return s.ctx.db.query<{ event: string; payload: any }>('SELECT event, payload FROM outbox_events WHERE subject = $1 ORDER BY id', [subject]);
}

async function countCharges(s: TestServer, accountId: number) {
  const [row] = await s.ctx.db.query<{ n: number }>("SELECT count(*)::bigint AS n FROM transactions WHERE account_id = $1 AND kind = 'charge'", [accountId]);
  return row!.n;
}

describe.each(BACKENDS)('POST /pix/cash-in on %s', (backend) => {
  const clock = new ManualClock(Date.parse('2026-03-10T12:00:00.000Z'));
  let s: TestServer;
  let m: MerchantFixture;
  let email: string;
  let evp: string;
  beforeAll(async () => {
    s = await startTestServer({ backend, clock });
    m = await merchantWithKey(s);
    // The e-mail key is older, yet charges use the random key by default.
    email = await addPixKey(s, m.accountId, 'email', `loja${m.accountId}@example.com`);
    evp = await addPixKey(s, m.accountId, 'evp');
  });
  afterAll(async () => s?.close());

  it('creates a charge: 201 with its id, BR Code and QR image; a pending inbound charge record; pix.charge.created', async () => {
    const res = await m.client.post('/pix/cash-in', {
      amount: 1590,
      expires_in: 600,
      description: 'Pedido 42',
      tag: 'loja-centro',
      external_id: 'order-42',
      payer_name: 'Maria da Silva',
      payer_document: '529.982.247-25',
    });
    expect(res.status).toBe(201);
    const now = clock.now();
    expect(res.body).toEqual({
      worked: true,
      id: expect.stringMatching(UUID),
      transaction_id: expect.stringMatching(/^PIXCHG20260310120000[A-Z0-9]{10}$/),
      txid: expect.stringMatching(/^[A-Z0-9]{25}$/),
      status: 'created',
      amount: 159_000,
      description: 'Pedido 42',
      tag: 'loja-centro',
      external_id: 'order-42',
      pix_key: evp,
      pix_key_type: 'evp',
      payer_name: 'Maria da Silva',
      payer_document: '52998224725',
      emv: expect.any(String),
      qr_code_image: expect.stringMatching(/^data:image\/png;base64,[A-Za-z0-9+/]+=*$/),
      created_at: now.toISOString(),
      expires_at: new Date(now.getTime() + 600_000).toISOString(),
      paid_at: null,
      expired_at: null,
    });
    expect(res.body.expires_at).toMatch(/Z$/);

    const [t] = await s.ctx.db.query(
      `SELECT id, account_id, kind, type, direction, status, payment_status, tag, external_id, amount, fee_amount,
              description, end_to_end_id, completed_at FROM transactions WHERE transaction_id = $1`,
      [res.body.transaction_id],
    );
    expect(t).toEqual({
      id: res.body.id,
      account_id: m.accountId,
      kind: 'charge',
      type: 'pix',
      direction: 'inbound',
      status: TX_STATUS.pending,
      payment_status: null,
      tag: 'loja-centro',
      external_id: 'order-42',
      amount: 159_000,
      fee_amount: 0,
      description: 'Pedido 42',
      end_to_end_id: null,
      completed_at: null,
    });
    const [c] = await s.ctx.db.query('SELECT txid, status, pix_key, brcode, expires_at, paid_at, expired_at FROM pix_charges WHERE transaction_uuid = $1', [res.body.id]);
    expect(c).toEqual({
      txid: res.body.txid,
      status: 'created',
      pix_key: evp,
      brcode: res.body.emv,
      expires_at: new Date(res.body.expires_at),
      paid_at: null,
      expired_at: null,
    });

    expect(await outbox(s, res.body.transaction_id)).toEqual([
      {
        event: 'pix.charge.created',
        payload: {
          event: 'pix.charge.created',
          status: 'created',
          transaction_id: res.body.transaction_id,
          txid: res.body.txid,
          amount: 159_000,
          expires_at: res.body.expires_at,
          created_at: res.body.created_at,
          tag: 'loja-centro',
          external_id: 'order-42',
        },
      },
    ]);
  });

  it('the BR Code is a valid EMV payload: pixgate’s decoder and an independent one agree', async () => {
    const res = await m.client.post('/pix/cash-in', { amount: 123_456 });
    expect(res.status).toBe(201);
    const emv: string = res.body.emv;

    const d = decodeBrCode(emv); // checks CRC, GUI, currency, country
    expect(d).toMatchObject({ key: evp, url: null, amountCents: 123_456, txid: res.body.txid, merchantName: 'Loja Teste', merchantCity: 'SAO PAULO', singleUse: true });

    const f = emvFields(emv);
    expect([...f.keys()]).toEqual(['00', '01', '26', '52', '53', '54', '58', '59', '60', '62', '63']);
    expect(f.get('00')).toBe('01');
    expect(f.get('01')).toBe('12'); // point of initiation: single use
    const account = emvFields(f.get('26')!);
    expect(account.get('00')).toBe('br.gov.bcb.pix');
    expect(account.get('01')).toBe(evp);
    expect(f.get('52')).toBe('0000');
    expect(f.get('53')).toBe('986');
    expect(f.get('54')).toBe('1234.56');
    expect(f.get('58')).toBe('BR');
    expect(f.get('59')!.length).toBeLessThanOrEqual(25);
    expect(f.get('60')).toBe('SAO PAULO');
    expect(f.get('60')!.length).toBeLessThanOrEqual(15);
    expect(emvFields(f.get('62')!).get('05')).toBe(res.body.txid);
    expect(emv.slice(-8, -4)).toBe('6304');
    expect(f.get('63')).toBe(crcCcittFalse(emv.slice(0, -4)));
  });

  it('a long merchant name is cut to 25 plain characters in the BR Code', async () => {
    const other = await merchantWithKey(s, { name: 'Comércio de Alimentos Saudáveis & Naturais Ltda' });
    await addPixKey(s, other.accountId, 'evp');
    const res = await other.client.post('/pix/cash-in', { amount: 1 });
    expect(res.status).toBe(201);
    expect(emvFields(res.body.emv).get('59')).toBe('Comercio de Alimentos Sau');
    expect(emvFields(res.body.emv).get('54')).toBe('0.01');
  });

  it('the QR image is a PNG of exactly the QR symbol of the BR Code, with a 4-module quiet zone', async () => {
    const res = await m.client.post('/pix/cash-in', { amount: 990 });
    expectQrImageOf(res.body.qr_code_image, res.body.emv);
  });

  it('pix_key chooses one of the account’s active keys; another key is 422', async () => {
    const res = await m.client.post('/pix/cash-in', { amount: 100, pix_key: ` ${email.toUpperCase()} ` });
    expect(res.status).toBe(201);
    expect(res.body).toMatchObject({ pix_key: email, pix_key_type: 'email' });
    expect(decodeBrCode(res.body.emv).key).toBe(email);

    const before = await countCharges(s, m.accountId);
    const wrong = await m.client.post('/pix/cash-in', { amount: 100, pix_key: 'someone-else@example.com' });
    expect(wrong.status).toBe(422);
    expect(wrong.body).toEqual({ errors: { unprocessable_entity: 'pix_key is not an active PIX key of this account' } });
    expect(await countCharges(s, m.accountId)).toBe(before);
  });

  it('an account without an active PIX key gets 422', async () => {
    const bare = await merchantWithKey(s);
    const expected = { errors: { unprocessable_entity: 'The account has no active PIX key; register one before creating charges' } };
    let res = await bare.client.post('/pix/cash-in', { amount: 100 });
    expect(res.status).toBe(422);
    expect(res.body).toEqual(expected);
    const key = await addPixKey(s, bare.accountId, 'evp');
    await s.ctx.db.query("UPDATE pix_keys SET status = 'inactive' WHERE key = $1", [key]);
    res = await bare.client.post('/pix/cash-in', { amount: 100 });
    expect(res.status).toBe(422);
    expect(res.body).toEqual(expected);
    expect(await countCharges(s, bare.accountId)).toBe(0);
  });

  it('bad input: 400 with a field map, nothing written', async () => {
    const externalIdRule = ['must be 1 to 128 characters from a-z A-Z 0-9 . _ : -'];
    const cases: [unknown, Record<string, string[]>][] = [
      [{}, { amount: ['is required'] }],
      [{ amount: 0 }, { amount: ['must be greater than or equal to 1'] }],
      [{ amount: -100 }, { amount: ['must be greater than or equal to 1'] }],
      [{ amount: 10.5 }, { amount: ['must be an integer'] }],
      [{ amount: '1000' }, { amount: ['must be a number'] }],
      [{ amount: MAX_AMOUNT_CENTS + 1 }, { amount: ['must be less than or equal to 100000000000'] }],
      [{ amount: 100, expires_in: 59 }, { expires_in: ['must be greater than or equal to 60'] }],
      [{ amount: 100, expires_in: 2_592_001 }, { expires_in: ['must be less than or equal to 2592000'] }],
      [{ amount: 100, expires_in: 90.5 }, { expires_in: ['must be an integer'] }],
      [{ amount: 100, description: 'x'.repeat(141) }, { description: ['is too long (maximum is 140 characters)'] }],
      [{ amount: 100, external_id: 'order 42' }, { external_id: externalIdRule }],
      [{ amount: 100, external_id: 'x'.repeat(129) }, { external_id: externalIdRule }],
      [{ amount: 100, external_id: '   ' }, { external_id: externalIdRule }],
      [{ amount: 100, tag: 'promoção' }, { tag: externalIdRule }],
      [{ amount: 100, payer_document: '529.982.247-24' }, { payer_document: ['must be a valid CPF (11 digits) or CNPJ (14 characters)'] }],
      [{ amount: 100, payer_document: '1234' }, { payer_document: ['must be a valid CPF (11 digits) or CNPJ (14 characters)'] }],
      [{ amount: 100, payer_name: '' }, { payer_name: ["can't be blank"] }],
      [{ amount: 100, pix_key: 42 }, { pix_key: ['must be a string'] }],
      [{ ammount: 100 }, { amount: ['is required'], ammount: ['is not a permitted field'] }],
    ];
    const before = await countCharges(s, m.accountId);
    for (const [body, fields] of cases) {
      const res = await m.client.post('/pix/cash-in', body);
      expect({ body, status: res.status, answer: res.body }).toEqual({ body, status: 400, answer: { errors: { bad_request: fields } } });
    }
    expect(await countCharges(s, m.accountId)).toBe(before);
  });

  it('accepts null for optional fields, CNPJ payers, and 128-byte external ids after trimming', async () => {
    const externalId = 'a.B_c:d-'.repeat(16);
    const res = await m.client.post('/pix/cash-in', {
      amount: 250,
      expires_in: null,
      description: null,
      tag: null,
      payer_document: '11.222.333/0001-81',
      external_id: `  ${externalId}\t`,
    });
    expect(res.status).toBe(201);
    expect(res.body).toMatchObject({ external_id: externalId, tag: null, payer_document: '11222333000181', description: CHARGE.defaultDescription });
    expect(Date.parse(res.body.expires_at) - Date.parse(res.body.created_at)).toBe(CHARGE.defaultExpiresInSeconds * 1000);
  });

  it('external_id: the same payload again answers the original charge (200), never a second one', async () => {
    const body = { amount: 4200, external_id: 'order-77', tag: 'loja-norte', description: 'Pedido 77' };
    const first = await m.client.post('/pix/cash-in', body);
    expect(first.status).toBe(201);
    // Same command written differently: key order, whitespace around the id, explicit default.
    const again = await m.client.post('/pix/cash-in', { description: 'Pedido 77', tag: 'loja-norte', external_id: ' order-77 ', amount: 4200, expires_in: null });
    expect(again.status).toBe(200);
    expect(again.body).toEqual(first.body);
    const rows = await s.ctx.db.query("SELECT transaction_id FROM transactions WHERE account_id = $1 AND external_id = 'order-77'", [m.accountId]);
    expect(rows).toEqual([{ transaction_id: first.body.transaction_id }]);
    expect((await outbox(s, first.body.transaction_id)).map((e) => e.event)).toEqual(['pix.charge.created']);
  });

  it('external_id: another payload, or an id held by another kind of movement, is 409', async () => {
    const first = await m.client.post('/pix/cash-in', { amount: 4200, external_id: 'order-78' });
    expect(first.status).toBe(201);
    const conflict = { errors: { conflict: 'external_id was already used for a different request' } };
    for (const changed of [{ amount: 4201 }, { expires_in: 7200 }, { tag: 'x' }, { description: 'other' }, { pix_key: email }, { payer_name: 'Ana' }]) {
      const res = await m.client.post('/pix/cash-in', { amount: 4200, external_id: 'order-78', ...changed });
      expect({ changed, status: res.status, body: res.body }).toEqual({ changed, status: 409, body: conflict });
    }
    await s.ctx.db.transaction((tx) =>
      insertTransaction(tx, {
        transaction_id: `PIXOUT${Date.now()}`,
        account_id: m.accountId,
        kind: 'cash_out',
        type: 'pix',
        direction: 'outbound',
        status: TX_STATUS.completed,
        amount: 100,
        external_id: 'payout-1',
        payer_name: 'Loja',
        payer_document: '11444777000161',
      }),
    );
    const res = await m.client.post('/pix/cash-in', { amount: 1, external_id: 'payout-1' });
    expect(res.status).toBe(409);
    expect(res.body).toEqual(conflict);
    // Another account may use the same external_id.
    const other = await merchantWithKey(s);
    await addPixKey(s, other.accountId, 'evp');
    expect((await other.client.post('/pix/cash-in', { amount: 4200, external_id: 'order-78' })).status).toBe(201);
  });

  it('external_id: concurrent identical requests create one charge and all answer it', async () => {
    const body = { amount: 777, external_id: 'race-1' };
    const answers = await Promise.all(Array.from({ length: 8 }, () => m.client.post('/pix/cash-in', body)));
    expect(answers.map((a) => a.status).sort()).toEqual([200, 200, 200, 200, 200, 200, 200, 201]);
    expect(new Set(answers.map((a) => a.body.transaction_id)).size).toBe(1);
    const rows = await s.ctx.db.query("SELECT id FROM transactions WHERE account_id = $1 AND external_id = 'race-1'", [m.accountId]);
    expect(rows).toHaveLength(1);
    expect(await outbox(s, answers[0]!.body.transaction_id)).toHaveLength(1);
  });

  it('Idempotency-Key: a repeat is replayed byte for byte and creates nothing', async () => {
    const before = await countCharges(s, m.accountId);
    const first = await m.client.post('/pix/cash-in', { amount: 3000 }, { idempotencyKey: 'cash-in-idem-1' });
    const again = await m.client.post('/pix/cash-in', { amount: 3000 }, { idempotencyKey: 'cash-in-idem-1' });
    expect(first.status).toBe(201);
    expect(again.status).toBe(201);
    expect(again.headers.get('x-idempotent-replay')).toBe('true');
    expect(again.text).toBe(first.text);
    expect(await countCharges(s, m.accountId)).toBe(before + 1);
  });

  it('X-Key-Case: camelCase in and out; signature v2 accepted', async () => {
    const res = await m.client.post('/pix/cash-in', { amount: 500, expiresIn: 120, externalId: 'camel-1', payerName: 'Ana' }, { camelCase: true });
    expect(res.status).toBe(201);
    expect(res.body).toMatchObject({ externalId: 'camel-1', payerName: 'Ana', status: 'created', amount: 50_000, pixKeyType: 'evp' });
    expect(Object.keys(res.body)).toEqual(expect.arrayContaining(['transactionId', 'qrCodeImage', 'expiresAt', 'expiredAt']));
    expect(Date.parse(res.body.expiresAt) - Date.parse(res.body.createdAt)).toBe(120_000);
    const v2 = await m.client.post('/pix/cash-in', { amount: 501 }, { sign: 'v2', timestamp: Math.floor(clock.now().getTime() / 1000) });
    expect(v2.status).toBe(201);
  });

  it('GET /pix/cash-in/:id reads a charge again, BR Code and QR image included, by any of its ids; another account’s is 404', async () => {
    const created = await m.client.post('/pix/cash-in', { amount: 777, external_id: `read-${m.accountId}` });
    expect(created.status).toBe(201);
    for (const id of [created.body.id, created.body.id.toUpperCase(), created.body.transaction_id, created.body.txid, created.body.external_id]) {
      const read = await m.client.get(`/pix/cash-in/${encodeURIComponent(id)}`);
      expect(read.status).toBe(200);
      expect(read.body).toEqual(created.body);
    }
    const other = await merchantWithKey(s);
    expect((await other.client.get(`/pix/cash-in/${created.body.id}`)).status).toBe(404);
    expect((await m.client.get('/pix/cash-in/nope')).body).toEqual({ errors: { not_found: 'charge not found' } });
    const weak = await merchantWithKey(s, { permissions: ['pix:write'] });
    expect((await weak.client.get(`/pix/cash-in/${created.body.id}`)).status).toBe(403);
  });

  it('needs pix:write (403 permission shape) and a signature (401)', async () => {
    const reader = await merchantWithKey(s, { permissions: ['pix:read', 'transfer:read'] });
    const res = await reader.client.post('/pix/cash-in', { amount: 100 });
    expect(res.status).toBe(403);
    expect(res.body).toEqual({ error: 'forbidden', message: 'API key lacks permission: pix:write' });

    const before = await countCharges(s, m.accountId);
    const unsigned = await m.client.post('/pix/cash-in', { amount: 100 }, { sign: false });
    expect(unsigned.status).toBe(401);
    expect(unsigned.body).toEqual({ worked: false, detail: 'Missing HMAC header' });
    const forged = await m.client.post('/pix/cash-in', { amount: 100 }, { hmac: 'ab'.repeat(64) });
    expect(forged.status).toBe(401);
    expect(forged.body).toEqual({ worked: false, detail: 'Invalid HMAC signature' });
    expect(await countCharges(s, m.accountId)).toBe(before);
  });
});
