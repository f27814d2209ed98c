import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { encodeBrCode, crc16 } from '../../src/lib/brcode.js';
import { normalizePixKey } from '../../src/pix/keys.js';
import { BACKENDS } from '../helpers/db.js';
import { merchantWithKey, type MerchantFixture } from '../helpers/client.js';
import { validCpf } from '../helpers/fixtures.js';
import { balances, eventNames, expectLedgerConsistent, foreignKey, SIM_FAST, sandbox, txRow, waitFor } from '../helpers/pix.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

/** The cash-out error body (docs/pix.md): `{worked: false, errors: {<code>: message}, code, detail}`. */
function expectCashOutError(res: { status: number; body: any }, status: number, code: string, message?: string) {
  expect(res.status).toBe(status);
  expect(res.body).toEqual({ worked: false, errors: { [code]: message ?? expect.any(String) }, code, detail: expect.any(String) });
}

describe.each(BACKENDS)('POST /pix/cash-out on %s', (backend) => {
  let s: TestServer;
  let m: MerchantFixture;
  let key: string;
  beforeAll(async () => {
    s = await startTestServer({ backend, env: SIM_FAST });
    m = await merchantWithKey(s, { depositCents: 1_000_000 });
    key = await foreignKey(s);
  });
  afterAll(async () => s?.close());

  it('accepts: the response table fields in base units, money reserved, pix.payout.processing written', async () => {
    const before = await balances(s.ctx.db, m.accountId);
    const res = await m.client.post('/pix/cash-out', { amount: 1234, pix_key: key, description: 'Fornecedor', external_id: 'order-1' });
    expect(res.status).toBe(200);
    // SIM_FAST settles 30 ms after acceptance: on a loaded machine the settlement may land before
    // the answer is written, which then says so (final, settled) — never anything else.
    const settledFirst = res.body.final === true;
    expect(res.body).toEqual({
      worked: true,
      final: settledFirst,
      transaction_id: expect.stringMatching(/^PIXOUT\d{14}[A-Z0-9]{10}$/),
      end_to_end_id: expect.stringMatching(/^E99999999\d{12}[A-Z0-9]{11}$/),
      external_id: 'order-1',
      amount: 123_400,
      fee_amount: 0,
      net_amount: 123_400,
      status: settledFirst ? 'settled' : 'accepted',
      detail: expect.any(String),
    });
    expect(res.body.end_to_end_id).toHaveLength(32);
    const after = await balances(s.ctx.db, m.accountId);
    // Reserved at acceptance (available -> pending) unless the settlement already happened.
    expect(after.available).toBe(before.available - 123_400);
    const events = await waitFor(() => eventNames(s.ctx.db, res.body.transaction_id), (e) => e.length === 2);
    expect(events).toEqual(['pix.payout.processing', 'pix.payout.confirmed']);
    expect((await balances(s.ctx.db, m.accountId)).pending).toBe(0);
    await expectLedgerConsistent(s.ctx.db);
  });

  it("charges the account's cash-out fee: net_amount = amount + fee, both reserved, the fee booked at settlement", async () => {
    const f = await merchantWithKey(s, { depositCents: 10_000 });
    await s.admin('PATCH', `/accounts/${f.accountId}`, { cash_out_fee_cents: 150 });
    const res = await f.client.post('/pix/cash-out', { amount: 1000, pix_key: key });
    expect(res.body).toMatchObject({ amount: 100_000, fee_amount: 15_000, net_amount: 115_000 });
    await waitFor(() => txRow(s.ctx.db, res.body.transaction_id), (r) => r.stage === 3);
    expect(await balances(s.ctx.db, f.accountId)).toEqual({ available: 1_000_000 - 115_000, blocked: 0, pending: 0 });
    const [fees] = await s.ctx.db.query<{ amount: number }>(
      `SELECT sum(e.amount)::bigint AS amount FROM ledger_entries e JOIN ledger_accounts la ON la.id = e.ledger_account_id
         JOIN ledger_transactions t ON t.id = e.ledger_transaction_id
        WHERE la.code = 'institution:fees' AND t.reference = $1`,
      [res.body.transaction_id],
    );
    expect(fees!.amount).toBe(15_000);
    // The fee counts in the balance check: 8850 cents left, 8850 + 150 fee > 8850.
    expectCashOutError(await f.client.post('/pix/cash-out', { amount: 8850, pix_key: key }), 400, 'insufficient_balance', 'Balance below amount plus fee');
    expect((await f.client.post('/pix/cash-out', { amount: 8700, pix_key: key })).status).toBe(200);
  });

  it('400 with a field map for a malformed request', async () => {
    const cases: [unknown, Record<string, string[]>][] = [
      [{ pix_key: key }, { amount: ['is required'] }],
      [{ amount: 100 }, { pix_key: ['is required'] }],
      [{ amount: 100, pix_key: key, description: 'x'.repeat(141) }, { description: ['is too long (maximum is 140 characters)'] }],
      [{ amount: 100, pix_key: key, external_id: 'has space' }, { external_id: ['must be 1 to 128 characters from a-z A-Z 0-9 . _ : -'] }],
      [{ amount: 100, pix_key: key, external_id: 'x'.repeat(129) }, { external_id: ['must be 1 to 128 characters from a-z A-Z 0-9 . _ : -'] }],
      [{ amount: 100, pix_key: key, pix_key_type: 'iban' }, { pix_key_type: ['must be one of: cpf, cnpj, email, phone, evp'] }],
      [{ amount: 100, pix_key: key, emv: '000201' }, { emv: ['must not be sent together with pix_key'] }],
      [{ amount: 100, pix_key: 42 }, { pix_key: ['must be a string'] }],
      [{ amount: 100, pix_key: key, ammount: 1 }, { ammount: ['is not a permitted field'] }],
      [[1, 2], { body: ['must be a JSON object'] }],
    ];
    for (const [body, fields] of cases) {
      const res = await m.client.post('/pix/cash-out', body);
      expect(res.status, JSON.stringify(body)).toBe(400);
      expect(res.body).toEqual({ worked: false, errors: { bad_request: fields }, code: 'bad_request', detail: expect.any(String) });
    }
  });

  it('422 invalid_amount: amount <= 0 or not an integer', async () => {
    for (const amount of [0, -5, 1.5, '100', 1e300]) {
      expectCashOutError(await m.client.post('/pix/cash-out', { amount, pix_key: key }), 422, 'invalid_amount', 'amount must be an integer number of cents greater than 0');
    }
  });

  it('422 pix_key_ambiguous for 11 digits without pix_key_type; with the type the key resolves', async () => {
    const cpf = validCpf();
    expectCashOutError(
      await m.client.post('/pix/cash-out', { amount: 100, pix_key: cpf }),
      422,
      'pix_key_ambiguous',
      'An 11-digit key may be a CPF or a phone number: send pix_key_type',
    );
    await sandbox(s, 'POST', '/dict/keys', { key: cpf, type: 'cpf', name: 'Pessoa CPF', document: cpf, ispb: '60746948' });
    const ok = await m.client.post('/pix/cash-out', { amount: 100, pix_key: cpf, pix_key_type: 'cpf' });
    expect(ok.status).toBe(200);
    // Typed as a phone, the same digits are another key (+55…), not in the directory — or, when
    // they do not follow the phone rule (area code, 9 digits starting with 9), no valid phone key.
    const asPhone = await m.client.post('/pix/cash-out', { amount: 100, pix_key: cpf, pix_key_type: 'phone' });
    expectCashOutError(asPhone, 422, normalizePixKey('phone', cpf) === null ? 'unprocessable_entity' : 'destination_not_found');
  });

  it('detects and normalizes cpf, cnpj, email, phone and evp keys', async () => {
    const cnpj = '11444777000161';
    const evp = '123e4567-e89b-42d3-a456-426614174000';
    const registered = [
      { key: '529.982.247-25', type: 'cpf', sent: { pix_key: '529.982.247-25' } },
      { key: cnpj, type: 'cnpj', sent: { pix_key: '11.444.777/0001-61' } },
      { key: 'Pessoa@Example.COM', type: 'email', sent: { pix_key: 'pessoa@example.com' } },
      { key: '+5511987654321', type: 'phone', sent: { pix_key: '+55 (11) 98765-4321' } },
      { key: evp, type: 'evp', sent: { pix_key: evp.toUpperCase() } },
    ];
    for (const r of registered) {
      const reg = await sandbox(s, 'POST', '/dict/keys', { key: r.key, type: r.type, name: `Dono ${r.type}`, document: cnpj, ispb: '60701190' });
      expect([200, 201]).toContain(reg.status);
      const res = await m.client.post('/pix/cash-out', { amount: 100, ...r.sent });
      expect(res.status, JSON.stringify(r)).toBe(200);
      const row = await txRow(s.ctx.db, res.body.transaction_id);
      expect(row.recipient_key_type).toBe(r.type);
      expect(row.counterparty_name).toBe(`Dono ${r.type}`);
    }
    // A phone typed without country code gets +55.
    const res = await m.client.post('/pix/cash-out', { amount: 100, pix_key: '(11) 98765-4321', pix_key_type: 'phone' });
    expect((await txRow(s.ctx.db, res.body.transaction_id)).recipient_key).toBe('+5511987654321');
  });

  it("422 unprocessable_entity 'Invalid PIX key format'", async () => {
    for (const body of [
      { pix_key: 'not a key' },
      { pix_key: '52998224724', pix_key_type: 'cpf' },
      { pix_key: 'a@b', pix_key_type: 'email' },
      { pix_key: '123', pix_key_type: 'evp' },
      { pix_key: '+0123', pix_key_type: 'phone' },
    ]) {
      expectCashOutError(await m.client.post('/pix/cash-out', { amount: 100, ...body }), 422, 'unprocessable_entity', 'Invalid PIX key format');
    }
  });

  it('422 destination_not_found for a key not in the directory', async () => {
    expectCashOutError(
      await m.client.post('/pix/cash-out', { amount: 100, pix_key: 'nobody@example.com' }),
      422,
      'destination_not_found',
      'Key not registered in the directory',
    );
  });

  it('422 self_transfer for a key of the caller; same_institution_transfer for another account here', async () => {
    const own = await s.admin('POST', '/pix-keys', { account_id: m.accountId, type: 'evp' });
    expectCashOutError(await m.client.post('/pix/cash-out', { amount: 100, pix_key: own.body.key }), 422, 'self_transfer', 'Transfer to own key (use TEF)');
    const other = await merchantWithKey(s);
    const theirs = await s.admin('POST', '/pix-keys', { account_id: other.accountId, type: 'evp' });
    expectCashOutError(
      await m.client.post('/pix/cash-out', { amount: 100, pix_key: theirs.body.key }),
      422,
      'same_institution_transfer',
      'Recipient in same institution (use TEF)',
    );
    // A key registered in the sandbox with this institution's ISPB belongs here too.
    const local = `local-${Date.now()}@example.com`;
    await sandbox(s, 'POST', '/dict/keys', { key: local, type: 'email', name: 'Cliente Local', document: validCpf(), ispb: '99999999' });
    expectCashOutError(await m.client.post('/pix/cash-out', { amount: 100, pix_key: local }), 422, 'same_institution_transfer');
    expect((await balances(s.ctx.db, m.accountId)).pending).toBeGreaterThanOrEqual(0);
  });

  it('400 insufficient_balance when amount plus fee exceeds the safe balance; nothing is written', async () => {
    const poor = await merchantWithKey(s, { depositCents: 500 });
    expectCashOutError(await poor.client.post('/pix/cash-out', { amount: 501, pix_key: key, external_id: 'too-much' }), 400, 'insufficient_balance', 'Balance below amount plus fee');
    expect(await balances(s.ctx.db, poor.accountId)).toEqual({ available: 50_000, blocked: 0, pending: 0 });
    expect((await poor.client.get('/transactions/ref/too-much')).status).toBe(404);
    expect((await poor.client.post('/pix/cash-out', { amount: 500, pix_key: key })).status).toBe(200);
  });

  it('400 provider_timeout debits nothing; the same request later resumes the original order', async () => {
    const t = await merchantWithKey(s, { depositCents: 10_000 });
    const slow = await foreignKey(s, { behavior: 'timeout' });
    const body = { amount: 2500, pix_key: slow, external_id: 'timeout-1' };
    const first = await t.client.post('/pix/cash-out', body);
    expectCashOutError(first, 400, 'provider_timeout', 'Timeout with the central bank; resend after 5 seconds');
    expect(await balances(s.ctx.db, t.accountId)).toEqual({ available: 1_000_000, blocked: 0, pending: 0 });
    const failed = await t.client.get('/transactions/ref/timeout-1');
    expect(failed.body).toMatchObject({ status: 'failed', payment_status: 'failed', reason_code: 'provider_timeout' });

    // The central bank answers again: the same command resumes the same order.
    await sandbox(s, 'POST', '/dict/keys', { key: slow, type: 'email', name: 'Maria Recebedora', document: validCpf(), ispb: '18236120', behavior: 'settle' });
    const again = await t.client.post('/pix/cash-out', body);
    expect(again.status).toBe(200);
    expect(again.body).toMatchObject({ transaction_id: failed.body.transaction_id, end_to_end_id: failed.body.end_to_end_id, status: 'accepted' });
    await waitFor(() => txRow(s.ctx.db, again.body.transaction_id), (r) => r.stage === 3);
    expect(await balances(s.ctx.db, t.accountId)).toEqual({ available: 750_000, blocked: 0, pending: 0 });
    expect(await eventNames(s.ctx.db, again.body.transaction_id)).toEqual(['pix.payout.processing', 'pix.payout.confirmed']);
    const [n] = await s.ctx.db.query<{ n: number }>('SELECT count(*)::bigint AS n FROM transactions WHERE account_id = $1 AND kind = $2', [t.accountId, 'cash_out']);
    expect(n!.n).toBe(1);
  });

  it('external_id: the same payload answers the original order, another payload is 409', async () => {
    const body = { amount: 700, pix_key: key, external_id: 'same-1', description: 'Pedido 1' };
    const first = await m.client.post('/pix/cash-out', body);
    // Key order and formatting do not make another command.
    const repeat = await m.client.post('/pix/cash-out', { description: 'Pedido 1', external_id: '  same-1 ', pix_key: key.toUpperCase(), amount: 700 });
    expect(repeat.status).toBe(200);
    expect(repeat.body.transaction_id).toBe(first.body.transaction_id);
    const changed = await m.client.post('/pix/cash-out', { ...body, amount: 701 });
    expectCashOutError(changed, 409, 'external_id_conflict', 'external_id was already used with a different payload');
    const settled = await waitFor(() => m.client.post('/pix/cash-out', body), (r) => r.body.final === true);
    expect(settled.body).toMatchObject({ transaction_id: first.body.transaction_id, final: true, status: 'settled' });
    const [n] = await s.ctx.db.query<{ n: number }>('SELECT count(*)::bigint AS n FROM transactions WHERE account_id = $1 AND external_id = $2', [m.accountId, 'same-1']);
    expect(n!.n).toBe(1);
  });

  it('emv: a BR Code is paid to its key, with its amount and txid; a bad CRC or structure is a clear 422', async () => {
    const emv = encodeBrCode({ key, amountCents: 1590, merchantName: 'Loja do Recebedor', merchantCity: 'Sao Paulo', txid: 'PEDIDO42' });
    const res = await m.client.post('/pix/cash-out', { emv });
    expect(res.status).toBe(200);
    expect(res.body.amount).toBe(159_000);
    const row = await txRow(s.ctx.db, res.body.transaction_id);
    expect(row).toMatchObject({ recipient_key: key, recipient_key_type: 'email' });
    expect(row.metadata.txid).toBe('PEDIDO42');
    expect((await m.client.post('/pix/cash-out', { emv, amount: 1590 })).status).toBe(200);

    const badCrc = emv.slice(0, -4) + (emv.endsWith('0000') ? '1111' : '0000');
    expectCashOutError(await m.client.post('/pix/cash-out', { emv: badCrc }), 422, 'unprocessable_entity', 'Invalid EMV payload: CRC does not match');
    const noGui = emv.slice(0, -4).replace('br.gov.bcb.pix', 'br.gov.bcb.pux');
    expectCashOutError(await m.client.post('/pix/cash-out', { emv: noGui + crc16(noGui) }), 422, 'unprocessable_entity', 'Invalid EMV payload: GUI must be br.gov.bcb.pix');
    expectCashOutError(await m.client.post('/pix/cash-out', { emv: 'hello' }), 422, 'unprocessable_entity', 'Invalid EMV payload: payload length is out of range');
    expectCashOutError(await m.client.post('/pix/cash-out', { emv, amount: 1591 }), 422, 'unprocessable_entity', 'amount differs from the amount of the EMV payload');
    const dynamic = encodeBrCode({ url: 'pix.example.com/qr/v2/abc', merchantName: 'X', merchantCity: 'Y' });
    expectCashOutError(
      await m.client.post('/pix/cash-out', { emv: dynamic, amount: 100 }),
      422,
      'unprocessable_entity',
      'Invalid EMV payload: dynamic BR Codes (location URL) are not supported',
    );
    const open = encodeBrCode({ key, merchantName: 'X', merchantCity: 'Y' });
    expect((await m.client.post('/pix/cash-out', { emv: open })).body).toMatchObject({ errors: { bad_request: { amount: ['is required when the EMV payload has no amount'] } } });
    expect((await m.client.post('/pix/cash-out', { emv: open, amount: 250 })).body.amount).toBe(25_000);
  });

  it('permission transfer:write, a signature and the pipeline before any business rule', async () => {
    const reader = await merchantWithKey(s, { permissions: ['transfer:read'] });
    const res = await reader.client.post('/pix/cash-out', { amount: 100, pix_key: key });
    expect(res.status).toBe(403);
    expect(res.body).toEqual({ error: 'forbidden', message: 'API key lacks permission: transfer:write' });
    expect((await m.client.post('/pix/cash-out', { amount: 0, pix_key: key }, { sign: false })).body).toEqual({ worked: false, detail: 'Missing HMAC header' });
  });

  it('X-Key-Case camelCase: camelCase request keys and response keys; Idempotency-Key replays byte for byte', async () => {
    const res = await m.client.post('/pix/cash-out', { amount: 300, pixKey: key, externalId: 'camel-1' }, { camelCase: true });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ worked: true, transactionId: expect.stringMatching(/^PIXOUT/), externalId: 'camel-1', feeAmount: 0, netAmount: 30_000 });
    const err = await m.client.post('/pix/cash-out', { amount: 0, pixKey: key }, { camelCase: true });
    expect(err.body).toMatchObject({ worked: false, errors: { invalidAmount: expect.any(String) }, code: 'invalid_amount' });

    const a = await m.client.post('/pix/cash-out', { amount: 301, pix_key: key }, { idempotencyKey: 'idem-cash-out-1' });
    const b = await m.client.post('/pix/cash-out', { amount: 301, pix_key: key }, { idempotencyKey: 'idem-cash-out-1' });
    expect(b.headers.get('x-idempotent-replay')).toBe('true');
    expect(b.text).toBe(a.text);
  });
});

describe.each(BACKENDS)('cash-out limits on %s', (backend) => {
  // A clock running at real speed but shifted to 22:00 in São Paulo (night) or 12:00 (day).
  const shiftedTo = (utcHour: number) => {
    const now = new Date();
    const target = new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), now.getUTCDate(), utcHour, 0, 0));
    const offset = target.getTime() - now.getTime();
    return { now: () => new Date(Date.now() + offset) };
  };
  let night: TestServer;
  let day: TestServer;
  beforeAll(async () => {
    [night, day] = await Promise.all([
      startTestServer({ backend, env: SIM_FAST, clock: shiftedTo(1) }), // 01:00Z = 22:00 in São Paulo (UTC-3)
      startTestServer({ backend, env: SIM_FAST, clock: shiftedTo(15) }), // 12:00 in São Paulo
    ]);
  });
  afterAll(async () => {
    await night?.close();
    await day?.close();
  });

  it('the operator API sets and shows the limits; defaults are documented values', async () => {
    const m = await merchantWithKey(day);
    const view = await day.admin('GET', `/accounts/${m.accountId}`);
    expect(view.body).toMatchObject({ cash_out_max_amount_cents: 10_000_000, cash_out_daily_limit_cents: 100_000_000, cash_out_nighttime_limit_cents: 2_000_000 });
    const patched = await day.admin('PATCH', `/accounts/${m.accountId}`, { cash_out_max_amount_cents: 5000, cash_out_daily_limit_cents: 9000, cash_out_nighttime_limit_cents: 0 });
    expect(patched.status).toBe(200);
    expect(patched.body).toMatchObject({ cash_out_max_amount_cents: 5000, cash_out_daily_limit_cents: 9000, cash_out_nighttime_limit_cents: 0 });
    const bad = await day.admin('PATCH', `/accounts/${m.accountId}`, { cash_out_daily_limit_cents: -1 });
    expect(bad.body).toEqual({ errors: { bad_request: { cash_out_daily_limit_cents: ['must be greater than or equal to 0'] } } });
  });

  it('per operation and daily limits (422 amount_limit_exceeded, daily_limit_exceeded); a rejection gives the amount back', async () => {
    const m = await merchantWithKey(day, { depositCents: 100_000 });
    await day.admin('PATCH', `/accounts/${m.accountId}`, { cash_out_max_amount_cents: 5000, cash_out_daily_limit_cents: 9000 });
    const key = await foreignKey(day);
    expectCashOutError(await m.client.post('/pix/cash-out', { amount: 5001, pix_key: key }), 422, 'amount_limit_exceeded', 'Amount above the per-operation limit');
    expect((await m.client.post('/pix/cash-out', { amount: 5000, pix_key: key })).status).toBe(200);
    const over = await m.client.post('/pix/cash-out', { amount: 4001, pix_key: key });
    expectCashOutError(over, 422, 'daily_limit_exceeded', 'Daily cash-out limit reached');
    expect(over.body.detail).toBe('Cash-outs are limited to R$ 90,00 per day (America/Sao_Paulo); R$ 40,00 remain');
    const refused = await foreignKey(day, { behavior: 'reject' });
    const r = await m.client.post('/pix/cash-out', { amount: 4000, pix_key: refused });
    await waitFor(() => txRow(day.ctx.db, r.body.transaction_id), (row) => row.stage === 3);
    expect((await m.client.post('/pix/cash-out', { amount: 4000, pix_key: key })).status).toBe(200);
  });

  it('422 nighttime_limit_exceeded between 20:00 and 06:00 (America/Sao_Paulo); the day limit does not apply it', async () => {
    const m = await merchantWithKey(night, { depositCents: 100_000 });
    const key = await foreignKey(night);
    await night.admin('PATCH', `/accounts/${m.accountId}`, { cash_out_nighttime_limit_cents: 0 });
    const closed = await m.client.post('/pix/cash-out', { amount: 100, pix_key: key });
    expectCashOutError(closed, 422, 'nighttime_limit_exceeded', 'Outside permitted hours');
    expect(closed.body.detail).toBe('Cash-outs are not permitted between 20:00 and 06:00 (America/Sao_Paulo) on this account');
    await night.admin('PATCH', `/accounts/${m.accountId}`, { cash_out_nighttime_limit_cents: 1000 });
    expect((await m.client.post('/pix/cash-out', { amount: 600, pix_key: key })).status).toBe(200);
    const over = await m.client.post('/pix/cash-out', { amount: 401, pix_key: key });
    expectCashOutError(over, 422, 'nighttime_limit_exceeded');
    expect(over.body.detail).toBe('Cash-outs between 20:00 and 06:00 (America/Sao_Paulo) are limited to R$ 10,00 per night; R$ 4,00 remain');

    const d = await merchantWithKey(day, { depositCents: 100_000 });
    await day.admin('PATCH', `/accounts/${d.accountId}`, { cash_out_nighttime_limit_cents: 0 });
    expect((await d.client.post('/pix/cash-out', { amount: 100, pix_key: await foreignKey(day) })).status).toBe(200);
  });
});
