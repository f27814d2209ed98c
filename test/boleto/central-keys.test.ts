import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { secretDigest } from '../../src/auth/secrets.js';
import { BACKENDS } from '../helpers/db.js';
import { validCnpj } from '../helpers/fixtures.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

/** POST /api/admin/central-keys with the optional beneficiary `account_id` (migration 0300). */
describe.each(BACKENDS)('admin central keys with a beneficiary account on %s', (backend) => {
  let s: TestServer;
  beforeAll(async () => {
    s = await startTestServer({ backend, workers: false });
  });
  afterAll(async () => {
    await s?.close();
  });

  it('stores the account with the key and answers it', async () => {
    const merchant = await s.admin('POST', '/merchants', { name: 'Escola Aurora', document: validCnpj() });
    const res = await s.admin('POST', '/central-keys', { name: 'ERP Aurora', account_id: merchant.body.account_id });
    expect(res.status).toBe(201);
    expect(res.body).toEqual({ api_key: expect.stringMatching(/^ck_[A-Za-z0-9_-]{43}$/), name: 'ERP Aurora', account_id: merchant.body.account_id });
    const [row] = await s.ctx.db.query<{ account_id: number }>('SELECT account_id FROM central_api_keys WHERE key_hash = $1', [secretDigest(res.body.api_key)]);
    expect(row!.account_id).toBe(merchant.body.account_id);
  });

  it('without account_id (or null) the key has none', async () => {
    expect((await s.admin('POST', '/central-keys', { name: 'No account' })).body.account_id).toBeNull();
    expect((await s.admin('POST', '/central-keys', { name: 'Null account', account_id: null })).body.account_id).toBeNull();
  });

  it('400 for an unknown or malformed account_id', async () => {
    const unknown = await s.admin('POST', '/central-keys', { name: 'x', account_id: 99_999_999 });
    expect(unknown.status).toBe(400);
    expect(unknown.body).toEqual({ errors: { bad_request: { account_id: ['does not exist'] } } });
    const malformed = await s.admin('POST', '/central-keys', { name: 'x', account_id: 'one' });
    expect(malformed.status).toBe(400);
    expect(malformed.body).toEqual({ errors: { bad_request: { account_id: ['must be a number'] } } });
    const [{ n }] = (await s.ctx.db.query<{ n: number }>("SELECT count(*)::bigint AS n FROM central_api_keys WHERE name = 'x'")) as [{ n: number }];
    expect(n).toBe(0);
  });
});
