import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { signV1 } from '../src/auth/hmac.js';
import { canonicalize } from '../src/lib/canonicalJson.js';
import { systemClock } from '../src/lib/clock.js';
import { MAX_AMOUNT_CENTS } from '../src/lib/money.js';
import { detectPixKeyType, normalizePixKey } from '../src/pix/keys.js';
import { boletoInput, centralClient, type CentralClient } from './boleto/helpers.js';
import { addPixKey, merchantWithKey, type MerchantFixture } from './helpers/client.js';
import { BACKENDS } from './helpers/db.js';
import { ManualClock, validCnpj, validCpf } from './helpers/fixtures.js';
import { expectLedgerConsistent, foreignKey, sandbox, SIM_FAST } from './helpers/pix.js';
import { startTestServer, TEST_ADMIN_TOKEN, type TestServer } from './helpers/server.js';

/**
 * Issue 11, "Hostile and unusual input": one regression test per reproduced defect. Every case here
 * failed on the code before the fix (500s, money moved, written rules broken).
 */

async function raw(s: TestServer, method: string, path: string, body?: string, headers: Record<string, string> = {}) {
  const res = await fetch(`${s.url}${path}`, {
    method,
    headers: { ...(body !== undefined ? { 'content-type': 'application/json' } : {}), ...headers },
    ...(body !== undefined ? { body } : {}),
  });
  const text = await res.text();
  let parsed: any = null;
  try {
    parsed = text ? JSON.parse(text) : null;
  } catch {
    parsed = text;
  }
  return { status: res.status, body: parsed, text, headers: res.headers };
}

const adminRaw = (s: TestServer, method: string, path: string, body?: string) => raw(s, method, `/api/admin${path}`, body, { authorization: `Bearer ${TEST_ADMIN_TOKEN}` });
const sandboxRaw = (s: TestServer, method: string, path: string, body?: string) => raw(s, method, `/api/sandbox${path}`, body, { authorization: `Bearer ${TEST_ADMIN_TOKEN}` });

async function transactionCount(s: TestServer, accountId: number): Promise<number> {
  const [row] = await s.ctx.db.query<{ n: number }>('SELECT count(*)::int AS n FROM transactions WHERE account_id = $1', [accountId]);
  return row!.n;
}

describe.each(BACKENDS)('hostile input on %s', (backend) => {
  let s: TestServer;
  let m: MerchantFixture;
  let key: string;
  let central: CentralClient;
  beforeAll(async () => {
    s = await startTestServer({ backend, env: SIM_FAST });
    m = await merchantWithKey(s, { depositCents: 1_000_000 });
    key = await foreignKey(s);
    central = await centralClient(s, { accountId: m.accountId });
  });
  afterAll(async () => s?.close());

  // 1. Keys named like Object.prototype members: the normal 400 field map, on every API.
  it('1. a body key named constructor, toString, valueOf, hasOwnProperty or __proto__ is a 400 naming it, on every route', async () => {
    const routes: Array<[string, (extra: string) => Promise<{ status: number; body: any }>]> = [
      ['cash-out', (x) => m.client.post('/pix/cash-out', `{"amount":100,"pix_key":"${key}",${x}}`)],
      ['refund', (x) => m.client.post('/pix/refund', `{"original_transaction_id":"PIXIN0000",${x}}`)],
      ['cpf/validate', (x) => m.client.post('/cpf/validate', `{"cpf":"52998224725",${x}}`)],
      ['webhooks', (x) => m.client.post('/webhooks', `{"url":"https://example.com/h","events":["pix.payout.confirmed"],${x}}`)],
      ['cash-in', (x) => m.client.post('/pix/cash-in', `{"amount":100,${x}}`)],
      ['med defense', (x) => m.client.post('/med/00000000-0000-4000-8000-000000000000/defense', `{"text":"x",${x}}`)],
      ['admin', (x) => adminRaw(s, 'POST', '/merchants', `{"name":"Loja","document":"${validCnpj()}",${x}}`)],
      ['admin deposit', (x) => adminRaw(s, 'POST', `/accounts/${m.accountId}/deposits`, `{"amount":100,${x}}`)],
      ['sandbox', (x) => sandboxRaw(s, 'POST', '/pix/inbound', `{"account_id":${m.accountId},"amount":100,${x}}`)],
      ['boleto', (x) => central.call('POST', '/boletos', `{"boleto":${JSON.stringify(boletoInput(systemClock))},${x}}`)],
    ];
    const before = await transactionCount(s, m.accountId);
    for (const name of ['constructor', 'toString', 'valueOf', 'hasOwnProperty', '__proto__']) {
      for (const value of ['1', '{"amount":5}']) {
        for (const [route, send] of routes) {
          const res = await send(`"${name}":${value}`);
          expect(res.status, `${route} ${name}=${value}: ${JSON.stringify(res.body)}`).toBe(400);
          expect(JSON.stringify(res.body), `${route} ${name}`).toContain(`"${name}"`);
        }
      }
    }
    expect(await transactionCount(s, m.accountId)).toBe(before);
  });

  // 2. __proto__ under camelCase must not write the amount through the prototype.
  it('2. {"__proto__":{"amount":5},"pixKey":…} under X-Key-Case camelCase pays nothing and is refused', async () => {
    const before = await transactionCount(s, m.accountId);
    for (const text of [`{"__proto__":{"amount":5},"pixKey":"${key}"}`, `{"pixKey":"${key}","__proto__":{"amount":5,"pixKey":"x"}}`]) {
      const res = await m.client.post('/pix/cash-out', text, { camelCase: true });
      expect(res.status, res.text).toBe(400);
      expect(res.body.errors.badRequest.__proto__).toEqual(['is not a permitted field']);
    }
    // Nested prototype keys are kept as data, never as prototypes.
    const cpf = await m.client.post('/cpf/validate', '{"cpf":"52998224725","constructor":{"prototype":{"x":1}}}', { camelCase: true });
    expect(cpf.status).toBe(400);
    expect(await transactionCount(s, m.accountId)).toBe(before);
  });

  // 3. Integer-ness from the JSON text; every amount bounded by MAX_AMOUNT_CENTS.
  it('3. amounts spelled 100.0, 1e2, 1E2, 1.5 or 99.99999999999999999 are refused everywhere; so is MAX_AMOUNT_CENTS + 1', async () => {
    const before = await transactionCount(s, m.accountId);
    const spellings = ['100.0', '1e2', '1E2', '1e+2', '1.5', '99.99999999999999999', '100.00000000000000001', String(MAX_AMOUNT_CENTS + 1)];
    for (const a of spellings) {
      const out = await m.client.post('/pix/cash-out', `{"amount":${a},"pix_key":"${key}"}`);
      expect(out.status, `cash-out ${a}`).toBe(422);
      expect(out.body).toEqual({ worked: false, errors: { invalid_amount: expect.any(String) }, code: 'invalid_amount', detail: expect.stringContaining(a) });

      const refund = await m.client.post('/pix/refund', `{"original_transaction_id":"PIXIN0000","amount":${a}}`);
      expect(refund.status, `refund ${a}`).toBe(400);
      expect(refund.body).toEqual({ worked: false, errors: { bad_request: { amount: [expect.any(String)] } } });

      const cashIn = await m.client.post('/pix/cash-in', `{"amount":${a}}`);
      expect(cashIn.status, `cash-in ${a}`).toBe(400);
      expect(cashIn.body.errors.bad_request.amount).toHaveLength(1);

      const deposit = await adminRaw(s, 'POST', `/accounts/${m.accountId}/deposits`, `{"amount":${a}}`);
      expect(deposit.status, `deposit ${a}`).toBe(400);
      expect(deposit.body.errors.bad_request.amount).toHaveLength(1);

      const inbound = await sandboxRaw(s, 'POST', '/pix/inbound', `{"account_id":${m.accountId},"amount":${a}}`);
      expect(inbound.status, `inbound ${a}`).toBe(400);
      expect(inbound.body.errors.bad_request.amount).toHaveLength(1);

      const b = boletoInput(systemClock);
      const boleto = await central.call('POST', '/boletos', JSON.stringify({ boleto: { ...b, amount_cents: 1 } }).replace('"amount_cents":1', `"amount_cents":${a}`));
      expect(boleto.status, `boleto ${a}`).toBe(400);
      expect(JSON.stringify(boleto.body)).toContain('amount_cents');
    }
    expect(await transactionCount(s, m.accountId)).toBe(before);
    // The integer spelling of the same amounts is accepted.
    expect((await adminRaw(s, 'POST', `/accounts/${m.accountId}/deposits`, '{"amount":100}')).status).toBe(201);
    expect((await adminRaw(s, 'POST', `/accounts/${m.accountId}/deposits`, `{"amount":${MAX_AMOUNT_CENTS}}`)).status).toBe(201);
    await expectLedgerConsistent(s.ctx.db);
  });

  // 5. Framework errors in each API's own shapes and headers.
  it('5. a malformed percent-encoding goes through each API pipeline: 401 unauthenticated, shape 4 400 after; central keeps X-RateLimit-*', async () => {
    const anon = await raw(s, 'GET', '/api/external/transactions/%E0%A4%A');
    expect(anon.status).toBe(401);
    expect(anon.body).toEqual({ error: { status: 401, message: expect.any(String) } });
    const authed = await raw(s, 'GET', '/api/external/transactions/%E0%A4%A', undefined, { authorization: m.client.authHeader() });
    expect(authed.status).toBe(400);
    expect(authed.body).toEqual({ errors: { bad_request: expect.any(String) } });

    const boleto = await central.call('GET', '/boletos/%E0%A4%A');
    expect(boleto.status).toBe(400);
    expect(boleto.headers.get('x-ratelimit-limit')).not.toBeNull();
    expect(boleto.body.success).toBe(false);
    const boletoAnon = await raw(s, 'GET', '/api/v1/central/boletos/%zz');
    expect(boletoAnon.status).toBe(401);
    expect(boletoAnon.headers.get('x-ratelimit-remaining')).not.toBeNull();

    const admin = await adminRaw(s, 'GET', '/accounts/%E0%A4%A');
    expect(admin.status).toBe(400);
    expect(admin.body).toEqual({ errors: { bad_request: expect.any(String) } });
    const adminAnon = await raw(s, 'GET', '/api/admin/accounts/%E0%A4%A');
    expect(adminAnon.status).toBe(401);
    expect(adminAnon.body.errors).toBeDefined();

    // Found by the fuzzer: U+0000 in a path, a query or a body string (PostgreSQL text cannot hold
    // it) was a 500; a path segment over 1000 characters the framework's own 414 body.
    for (const path of ['/api/external/transactions/%00', '/api/external/statement?status=%00', `/api/external/transactions/${'a'.repeat(1500)}`]) {
      const res = await raw(s, 'GET', path, undefined, { authorization: m.client.authHeader() });
      expect(res.status, path).toBe(400);
      expect(res.body).toEqual({ errors: { bad_request: expect.any(String) } });
    }
    const nulBody = await m.client.post('/pix/cash-out', `{"amount":1,"pix_key":"${key}","description":"a\\u0000b"}`);
    expect(nulBody.status).toBe(400);
    expect(nulBody.body).toEqual({ errors: { bad_request: 'Request body strings must not contain the character U+0000' } });
    const nulAdmin = await adminRaw(s, 'POST', '/merchants', `{"name":"a\\u0000","document":"${validCnpj()}"}`);
    expect(nulAdmin.status).toBe(400);
    const longCentral = await central.call('GET', `/boletos/${'9'.repeat(1500)}`);
    expect(longCentral.status).toBe(400);
    expect(longCentral.headers.get('x-ratelimit-limit')).not.toBeNull();

    // Body too large on the central API: its shape and its rate-limit headers.
    const big = await central.call('POST', '/boletos', `{"boleto":"${'x'.repeat(1024 * 1024 + 10)}"}`);
    expect(big.status).toBe(413);
    expect(big.headers.get('x-ratelimit-limit')).not.toBeNull();
    expect(big.body.success).toBe(false);
  });

  // 6. Webhook destinations: the host normalised fully; port 0 refused.
  it('6. https://printer.local../h and port 0 are refused', async () => {
    for (const url of ['https://printer.local../h', 'https://printer.local.../h', 'https://LOCALHOST../h']) {
      const res = await m.client.post('/webhooks', { url, events: ['pix.payout.confirmed'] });
      expect(res.status, url).toBe(422);
      expect(res.body.worked).toBe(false);
    }
    const port0 = await m.client.post('/webhooks', { url: 'https://example.com:0/h', events: ['pix.payout.confirmed'] });
    expect(port0.status).toBe(400);
    expect(port0.body).toEqual({ errors: { bad_request: { url: [expect.stringContaining('port')] } } });
  });

  // 8. An explicit X-Signature-Version: 1 is v1.
  it('8. X-Signature-Version: 1 with a v1 signature is accepted', async () => {
    const res = await m.client.post('/cpf/validate', { cpf: '52998224725' }, { headers: { 'x-signature-version': '1' } });
    expect(res.status, res.text).toBe(200);
    const bad = await m.client.post('/cpf/validate', { cpf: '52998224725' }, { headers: { 'x-signature-version': '1' }, hmac: 'a'.repeat(128) });
    expect(bad.status).toBe(401);
  });

  // 9. An unpaid charge is not final.
  it('9. the lookups of an unpaid charge say final: false', async () => {
    await addPixKey(s, m.accountId, 'evp');
    const charge = await m.client.post('/pix/cash-in', { amount: 500 });
    expect(charge.status, charge.text).toBe(201);
    const id = charge.body.transaction_id;
    const found = await m.client.get(`/transactions/${id}`);
    expect(found.body).toMatchObject({ status: 'pending', final: false });
  });

  // 10. Error texts name fields as the client sent them.
  it('10. under camelCase, error details name the fields in camelCase', async () => {
    const out = await m.client.post('/pix/cash-out', { amount: 100 }, { camelCase: true });
    expect(out.status).toBe(400);
    expect(out.body.errors.badRequest).toEqual({ pixKey: ['is required'] });
    expect(out.body.detail).toBe('pixKey is required');
    const refund = await m.client.post('/pix/refund', { amount: 1 }, { camelCase: true });
    expect(refund.status).toBe(400);
    expect(refund.body.errors.badRequest).toBe('originalTransactionId is required');
    const ext = await m.client.post('/pix/cash-out', { amount: 100, pixKey: key, externalId: 'bad id with spaces' }, { camelCase: true });
    expect(ext.status).toBe(400);
    expect(ext.body.detail).toMatch(/^externalId /);
    expect(ext.text).not.toContain('external_id');
  });

  // 11. Phone keys: one normaliser, the DICT rule.
  it('11. PIX phone keys: every spelling of a Brazilian number is the same key; other numbers are refused', async () => {
    const phone = '+5511987654321';
    const reg = await sandbox(s, 'POST', '/dict/keys', { key: phone, type: 'phone', name: 'Fone', document: validCpf(), ispb: '18236120' });
    expect(reg.status, JSON.stringify(reg.body)).toBe(201);
    for (const [pixKey, type] of [
      ['11 98765-4321', undefined],
      ['(11) 98765-4321', undefined],
      ['+55 11 98765-4321', undefined],
      ['5511987654321', 'phone'],
      ['11987654321', 'phone'],
    ] as const) {
      const res = await m.client.post('/pix/cash-out', { amount: 1, pix_key: pixKey, ...(type ? { pix_key_type: type } : {}) });
      expect(res.status, `${pixKey}: ${res.text}`).toBe(200);
    }
    for (const bad of ['+12025550123', '+5500987654321', '+5511887654321', '+55119876543210']) {
      const res = await m.client.post('/pix/cash-out', { amount: 1, pix_key: bad, pix_key_type: 'phone' });
      expect(res.status, bad).toBe(422);
      expect(res.body.code).toBe('unprocessable_entity');
      const own = await s.admin('POST', '/pix-keys', { account_id: m.accountId, type: 'phone', key: bad });
      expect(own.status, bad).toBeGreaterThanOrEqual(400);
      expect(own.status).toBeLessThan(500);
      const dict = await sandbox(s, 'POST', '/dict/keys', { key: bad, type: 'phone', name: 'X', document: validCpf(), ispb: '18236120' });
      expect(dict.status, bad).toBeGreaterThanOrEqual(400);
    }
    await expectLedgerConsistent(s.ctx.db);
  });
});

describe('phone key normaliser (unit)', () => {
  it('normalises every spelling to +55 + area code + 8 or 9 digits and refuses the rest', () => {
    for (const spelling of ['+5511987654321', '11 98765-4321', '(11) 98765-4321', '(11)98765-4321', '5511987654321', '+55 (11) 98765-4321', '11.98765.4321']) {
      expect(normalizePixKey('phone', spelling), spelling).toBe('+5511987654321');
    }
    expect(normalizePixKey('phone', '(21) 3456-7890')).toBe('+552134567890');
    for (const bad of ['+12025550123', '+5500987654321', '+550198765432', '+5511', '98765-4321', '+55 11 98765-43210', '+55119876543x']) {
      expect(normalizePixKey('phone', bad), bad).toBeNull();
    }
    expect(detectPixKeyType('11 98765-4321')).toEqual({ type: 'phone' });
    expect(detectPixKeyType('(11) 98765-4321')).toEqual({ type: 'phone' });
    expect(detectPixKeyType('11987654321')).toEqual({ ambiguous: true });
    expect(detectPixKeyType('529.982.247-25')).toEqual({ type: 'cpf' });
  });
});

describe.each(BACKENDS)('signature timestamp and version boundaries on %s', (backend) => {
  // The clock stands half a second into a second, so a fractional comparison would differ.
  const clock = new ManualClock(1_800_000_000_500);
  const T = 1_800_000_000;
  let s: TestServer;
  let m: MerchantFixture;
  beforeAll(async () => {
    s = await startTestServer({ backend, clock, workers: false });
    m = await merchantWithKey(s);
  });
  afterAll(async () => s?.close());

  it('7. X-Request-Timestamp within ±300 s inclusive is accepted; 301 s either side is refused', async () => {
    for (const ts of [T - 300, T + 300, T, T - 299, T + 299]) {
      const res = await m.client.post('/cpf/validate', { cpf: '52998224725' }, { sign: 'v2', timestamp: ts });
      expect(res.status, `${ts - T}: ${res.text}`).toBe(200);
    }
    for (const ts of [T - 301, T + 301]) {
      const res = await m.client.post('/cpf/validate', { cpf: '52998224725' }, { sign: 'v2', timestamp: ts });
      expect(res.status, `${ts - T}`).toBe(401);
      expect(res.body).toEqual({ worked: false, detail: 'Request timestamp is outside the 300-second tolerance' });
    }
  });
});

describe('homologation and X-Signature-Version: 1', () => {
  it('8. homologation still refuses v1, also when announced explicitly', async () => {
    const s = await startTestServer({ env: { APP_ENV: 'homologation' }, workers: false });
    try {
      const m = await merchantWithKey(s);
      const text = '{"cpf":"52998224725"}';
      const res = await m.client.post('/cpf/validate', text, { headers: { 'x-signature-version': '1', hmac: signV1(m.client.clientSecret, canonicalize(text)) } });
      expect(res.status).toBe(401);
      expect(res.body).toEqual({ worked: false, detail: 'HMAC signature version 2 is required' });
    } finally {
      await s.close();
    }
  });
});
