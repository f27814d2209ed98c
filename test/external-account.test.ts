import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BACKENDS } from './helpers/db.js';
import { merchantWithKey, type MerchantFixture } from './helpers/client.js';
import { startTestServer, type TestServer } from './helpers/server.js';

describe.each(BACKENDS)('GET /balance and POST /cpf/validate on %s', (backend) => {
  let s: TestServer;
  let m: MerchantFixture;
  beforeAll(async () => {
    s = await startTestServer({ backend });
    m = await merchantWithKey(s, { depositCents: 12_345 });
  });
  afterAll(async () => s?.close());

  it('GET /balance answers every balance figure in base units', async () => {
    const res = await m.client.get('/balance');
    expect(res.status).toBe(200);
    expect(res.body).toEqual({
      worked: true,
      account_id: m.accountId,
      currency: 'BRL',
      available: 1_234_500,
      blocked: 0,
      pending: 0,
      ledger_total: 1_234_500,
      safe: 1_234_500,
      as_of: expect.stringMatching(/Z$/),
    });
  });

  it('GET /balance needs account:read', async () => {
    const k = await merchantWithKey(s, { permissions: ['transfer:read'] });
    const res = await k.client.get('/balance');
    expect(res.status).toBe(403);
    expect(res.body).toEqual({ error: 'forbidden', message: 'API key lacks permission: account:read' });
  });

  it('POST /cpf/validate: valid, with or without punctuation', async () => {
    for (const cpf of ['529.982.247-25', '52998224725']) {
      const res = await m.client.post('/cpf/validate', { cpf });
      expect(res.status).toBe(200);
      expect(res.body).toEqual({ worked: true, valid: true, cpf: '52998224725', formatted: '529.982.247-25' });
    }
  });

  it('POST /cpf/validate: invalid, with the reason', async () => {
    const cases = [
      ['52998224724', 'invalid_check_digits', 'The check digits do not match the first nine digits'],
      ['111.111.111-11', 'repeated_digits', 'A CPF cannot be one digit repeated 11 times'],
      ['123', 'wrong_length', 'A CPF has 11 digits'],
      ['5299822472a', 'invalid_characters', 'A CPF holds digits only, optionally punctuated as 000.000.000-00'],
    ] as const;
    for (const [cpf, reason, detail] of cases) {
      const res = await m.client.post('/cpf/validate', { cpf });
      expect(res.status).toBe(200);
      expect(res.body).toEqual({ worked: true, valid: false, cpf, reason, detail });
    }
  });

  it('POST /cpf/validate: 400 for a missing or non-string cpf; needs account:read and a signature', async () => {
    expect((await m.client.post('/cpf/validate', {})).body).toEqual({ errors: { bad_request: { cpf: ['is required'] } } });
    expect((await m.client.post('/cpf/validate', { cpf: 52998224725 })).body).toEqual({ errors: { bad_request: { cpf: ['must be a string'] } } });
    const k = await merchantWithKey(s, { permissions: ['pix:read'] });
    expect((await k.client.post('/cpf/validate', { cpf: '52998224725' })).status).toBe(403);
    expect((await m.client.post('/cpf/validate', { cpf: '52998224725' }, { sign: false })).body).toEqual({ worked: false, detail: 'Missing HMAC header' });
  });
});
