import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { secretDigest } from '../src/auth/secrets.js';
import { BACKENDS } from './helpers/db.js';
import { validCnpj, validCpf } from './helpers/fixtures.js';
import { startTestServer, type TestServer } from './helpers/server.js';

describe.each(BACKENDS)('admin API on %s', (backend) => {
  let s: TestServer;
  beforeAll(async () => {
    s = await startTestServer({ backend });
  });
  afterAll(async () => {
    await s?.close();
  });

  async function merchant() {
    const res = await s.admin('POST', '/merchants', { name: 'Padaria Central', document: validCnpj() });
    expect(res.status).toBe(201);
    return res.body as { merchant_id: number; account_id: number };
  }

  describe('authentication', () => {
    it('401 without the token, with a wrong token, and with another scheme', async () => {
      for (const authorization of [undefined, 'Bearer wrong-token-wrong-token', `Basic ${Buffer.from('a:b').toString('base64')}`]) {
        const res = await fetch(`${s.url}/api/admin/merchants`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', ...(authorization ? { authorization } : {}) },
          body: JSON.stringify({ name: 'x', document: validCpf() }),
        });
        expect(res.status).toBe(401);
        expect(await res.json()).toEqual({ errors: { unauthorized: 'Missing or invalid admin token' } });
      }
    });
  });

  describe('failed authentications', () => {
    it('past 5 failures a minute from one address the answer is 429 with Retry-After; the right token still passes', async () => {
      // A clock that stands still: the five failures and the sixth fall in one window.
      const now = new Date();
      const fresh = await startTestServer({ backend, clock: { now: () => now } });
      try {
        const attempt = (token: string) => fetch(`${fresh.url}/api/admin/accounts/1`, { headers: { authorization: `Bearer ${token}` } });
        for (let i = 0; i < 5; i++) expect((await attempt(`wrong-token-${i}-xxxxxxxx`)).status).toBe(401);
        const limited = await attempt('wrong-token-6-xxxxxxxx');
        expect(limited.status).toBe(429);
        expect(await limited.json()).toEqual({ errors: { rate_limited: 'Too many failed admin authentications from this address; retry later' } });
        expect(Number(limited.headers.get('retry-after'))).toBeGreaterThan(0);
        expect((await fresh.admin('GET', '/accounts/999999')).status).toBe(404);
        const sandbox = await fetch(`${fresh.url}/api/sandbox/dict/keys`, { method: 'POST', headers: { authorization: 'Bearer nope' } });
        expect(sandbox.status).toBe(429);
      } finally {
        await fresh.close();
      }
    });
  });

  describe('POST /merchants', () => {
    it('201 with the merchant and its first account', async () => {
      const document = validCpf();
      const res = await s.admin('POST', '/merchants', { name: 'Ana Souza', document });
      expect(res.status).toBe(201);
      expect(res.body).toEqual({
        merchant_id: expect.any(Number),
        account_id: expect.any(Number),
        name: 'Ana Souza',
        document,
        status: 'active',
      });
    });

    it('400 with a field map for missing and invalid fields', async () => {
      const res = await s.admin('POST', '/merchants', { document: '12345678900', extra: 1 });
      expect(res.status).toBe(400);
      expect(res.body).toEqual({
        errors: {
          bad_request: {
            name: ['is required'],
            document: ['has invalid check digits'],
            extra: ['is not a permitted field'],
          },
        },
      });
    });

    it('400 for a body that is not JSON', async () => {
      const res = await s.admin('POST', '/merchants', '{"name": ');
      expect(res.status).toBe(400);
      expect(res.body).toEqual({ errors: { bad_request: 'Request body is not valid JSON' } });
    });
  });

  describe('accounts', () => {
    it('GET returns status and balance in base units', async () => {
      const m = await merchant();
      const res = await s.admin('GET', `/accounts/${m.account_id}`);
      expect(res.status).toBe(200);
      expect(res.body).toMatchObject({
        account_id: m.account_id,
        merchant_id: m.merchant_id,
        status: 'active',
        balance: 0,
        balances: { available: 0, blocked: 0, pending: 0, ledger_total: 0, safe: 0 },
      });
    });

    it('GET 404 for an unknown account and 400 for a non-numeric id', async () => {
      expect((await s.admin('GET', '/accounts/999999')).body).toEqual({ errors: { not_found: 'account not found' } });
      const bad = await s.admin('GET', '/accounts/abc');
      expect(bad.status).toBe(400);
      expect(bad.body.errors.bad_request.account_id).toEqual(['must be a positive integer']);
    });

    it('PATCH changes status and fees', async () => {
      const m = await merchant();
      const res = await s.admin('PATCH', `/accounts/${m.account_id}`, { status: 'inactive', cash_out_fee_cents: 150, cash_in_fee_cents: 25 });
      expect(res.status).toBe(200);
      expect(res.body).toMatchObject({ account_id: m.account_id, status: 'inactive', cash_out_fee_cents: 150, cash_in_fee_cents: 25 });
      const again = await s.admin('GET', `/accounts/${m.account_id}`);
      expect(again.body.status).toBe('inactive');
    });

    it('PATCH 400 for bad values and for an empty body; 404 for an unknown account', async () => {
      const m = await merchant();
      const bad = await s.admin('PATCH', `/accounts/${m.account_id}`, { status: 'frozen', cash_out_fee_cents: -1 });
      expect(bad.status).toBe(400);
      expect(bad.body.errors.bad_request).toEqual({
        status: ['must be one of: active, inactive'],
        cash_out_fee_cents: ['must be greater than or equal to 0'],
      });
      const empty = await s.admin('PATCH', `/accounts/${m.account_id}`, {});
      expect(empty.status).toBe(400);
      expect(empty.body.errors.bad_request).toEqual({ body: ['must change at least one field'] });
      expect((await s.admin('PATCH', '/accounts/999999', { status: 'active' })).status).toBe(404);
    });

    it('POST deposits credits the account in base units and shows as internal inbound', async () => {
      const m = await merchant();
      const res = await s.admin('POST', `/accounts/${m.account_id}/deposits`, { amount: 12_345, description: 'Aporte' });
      expect(res.status).toBe(201);
      expect(res.body).toEqual({ transaction_id: expect.stringMatching(/^DEP\d{14}[A-Z0-9]{10}$/), amount: 1_234_500 });
      const acct = await s.admin('GET', `/accounts/${m.account_id}`);
      expect(acct.body.balance).toBe(1_234_500);
      const [row] = await s.ctx.db.query<{ type: string; direction: string; status: number; amount: number; description: string }>(
        'SELECT type, direction, status, amount, description FROM transactions WHERE transaction_id = $1',
        [res.body.transaction_id],
      );
      expect(row).toEqual({ type: 'internal', direction: 'inbound', status: 1, amount: 1_234_500, description: 'Aporte' });
    });

    it('POST deposits 400 for non-positive, fractional or missing amounts; 404 for an unknown account', async () => {
      const m = await merchant();
      for (const [body, message] of [
        [{ amount: 0 }, 'must be greater than or equal to 1'],
        [{ amount: -5 }, 'must be greater than or equal to 1'],
        [{ amount: 10.5 }, 'must be an integer'],
        [{ amount: '100' }, 'must be a number'],
        [{}, 'is required'],
      ] as const) {
        const res = await s.admin('POST', `/accounts/${m.account_id}/deposits`, body);
        expect(res.status).toBe(400);
        expect(res.body).toEqual({ errors: { bad_request: { amount: [message] } } });
      }
      expect((await s.admin('POST', '/accounts/999999/deposits', { amount: 1 })).status).toBe(404);
      expect((await s.admin('GET', `/accounts/${m.account_id}`)).body.balance).toBe(0);
    });
  });

  describe('API keys', () => {
    it('POST creates a key whose secret is shown once and stored only as a digest', async () => {
      const m = await merchant();
      const res = await s.admin('POST', '/api-keys', {
        merchant_id: m.merchant_id,
        permissions: ['transfer:write', 'transfer:read'],
        ip_whitelist: ['127.0.0.1', '10.0.0.0/8'],
        expires_at: '2030-01-01T00:00:00Z',
      });
      expect(res.status).toBe(201);
      expect(res.body).toMatchObject({
        client_id: expect.stringMatching(/^cli_[A-Za-z0-9]+$/),
        client_secret: expect.stringMatching(/^sk_[A-Za-z0-9_-]{43}$/),
        permissions: ['transfer:write', 'transfer:read'],
        ip_whitelist: ['127.0.0.1', '10.0.0.0/8'],
        expires_at: '2030-01-01T00:00:00.000Z',
        active: true,
        hmac: true,
      });
      const rows = await s.ctx.db.query<Record<string, unknown>>('SELECT * FROM api_keys WHERE client_id = $1', [res.body.client_id]);
      expect(rows).toHaveLength(1);
      const stored = JSON.stringify(rows[0]);
      expect(stored).not.toContain(res.body.client_secret);
      expect(stored).not.toContain(res.body.client_secret.slice(3));
      expect(rows[0]!.secret_hash).toBe(secretDigest(res.body.client_secret));
    });

    it('accepts an empty whitelist and malformed entries (they never match) with warnings', async () => {
      const m = await merchant();
      const empty = await s.admin('POST', '/api-keys', { merchant_id: m.merchant_id, permissions: [], ip_whitelist: [] });
      expect(empty.status).toBe(201);
      expect(empty.body.ip_whitelist).toEqual([]);
      const odd = await s.admin('POST', '/api-keys', { merchant_id: m.merchant_id, permissions: ['pix:read'], ip_whitelist: ['010.0.0.1', ' 1.2.3.4'] });
      expect(odd.status).toBe(201);
      expect(odd.body.ip_whitelist).toEqual(['010.0.0.1', ' 1.2.3.4']);
      expect(odd.body.warnings).toHaveLength(2);
    });

    it('400 for unknown permissions, unknown merchants and accounts of another merchant', async () => {
      const m = await merchant();
      const other = await merchant();
      const res = await s.admin('POST', '/api-keys', { merchant_id: m.merchant_id, permissions: ['pix:admin'], ip_whitelist: '1.2.3.4' });
      expect(res.status).toBe(400);
      expect(Object.keys(res.body.errors.bad_request).sort()).toEqual(['ip_whitelist', 'permissions.0']);
      const unknown = await s.admin('POST', '/api-keys', { merchant_id: 99_999_999, permissions: [], ip_whitelist: [] });
      expect(unknown.body).toEqual({ errors: { bad_request: { merchant_id: ['does not exist'] } } });
      const foreign = await s.admin('POST', '/api-keys', { merchant_id: m.merchant_id, account_id: other.account_id, permissions: [], ip_whitelist: [] });
      expect(foreign.body).toEqual({ errors: { bad_request: { account_id: ['does not belong to the merchant'] } } });
    });

    it('PATCH updates permissions, whitelist and expiry without revealing the secret; revoke deactivates', async () => {
      const m = await merchant();
      const created = (await s.admin('POST', '/api-keys', { merchant_id: m.merchant_id, permissions: ['pix:read'], ip_whitelist: ['127.0.0.1'] })).body;
      const patched = await s.admin('PATCH', `/api-keys/${created.client_id}`, {
        permissions: ['pix:read', 'statement:read'],
        ip_whitelist: ['::1'],
        expires_at: null,
      });
      expect(patched.status).toBe(200);
      expect(patched.body).toMatchObject({ client_id: created.client_id, permissions: ['pix:read', 'statement:read'], ip_whitelist: ['::1'], expires_at: null, active: true });
      expect(patched.body).not.toHaveProperty('client_secret');
      expect(JSON.stringify(patched.body)).not.toContain(created.client_secret);

      const revoked = await s.admin('POST', `/api-keys/${created.client_id}/revoke`);
      expect(revoked.status).toBe(200);
      expect(revoked.body).toEqual({ client_id: created.client_id, active: false });
    });

    it('PATCH 400 for bad input, 404 for unknown keys; revoke 404 for unknown keys', async () => {
      const m = await merchant();
      const created = (await s.admin('POST', '/api-keys', { merchant_id: m.merchant_id, permissions: [], ip_whitelist: [] })).body;
      const bad = await s.admin('PATCH', `/api-keys/${created.client_id}`, { expires_at: 'tomorrow' });
      expect(bad.status).toBe(400);
      expect(bad.body.errors.bad_request.expires_at).toEqual(['must be an ISO 8601 timestamp with a time zone']);
      expect((await s.admin('PATCH', '/api-keys/cli_doesnotexist', { permissions: [] })).status).toBe(404);
      expect((await s.admin('POST', '/api-keys/cli_doesnotexist/revoke')).body).toEqual({ errors: { not_found: 'API key not found' } });
    });
  });

  describe('PIX keys and central keys', () => {
    it('POST /pix-keys registers a key (EVP generated when omitted) in the directory', async () => {
      const m = await merchant();
      const evp = await s.admin('POST', '/pix-keys', { account_id: m.account_id, type: 'evp' });
      expect(evp.status).toBe(201);
      expect(evp.body).toEqual({ account_id: m.account_id, type: 'evp', key: expect.stringMatching(/^[0-9a-f-]{36}$/) });
      const email = await s.admin('POST', '/pix-keys', { account_id: m.account_id, type: 'email', key: 'Vendas@Padaria.com.br' });
      expect(email.body).toEqual({ account_id: m.account_id, type: 'email', key: 'vendas@padaria.com.br' });
      const entry = await s.ctx.rail.directory.lookupKey('vendas@padaria.com.br');
      expect(entry).toMatchObject({ accountId: m.account_id, ispb: '99999999', type: 'email' });
    });

    it('400 for a malformed key or a missing key of a non-EVP type; 409 for a key already registered', async () => {
      const m = await merchant();
      const bad = await s.admin('POST', '/pix-keys', { account_id: m.account_id, type: 'cpf', key: '12345678900' });
      expect(bad.body).toEqual({ errors: { bad_request: { key: ['is not a valid cpf key'] } } });
      const missing = await s.admin('POST', '/pix-keys', { account_id: m.account_id, type: 'phone' });
      expect(missing.body).toEqual({ errors: { bad_request: { key: ['is required'] } } });
      const unknownAccount = await s.admin('POST', '/pix-keys', { account_id: 99_999_999, type: 'evp' });
      expect(unknownAccount.body).toEqual({ errors: { bad_request: { account_id: ['does not exist'] } } });
      await s.admin('POST', '/pix-keys', { account_id: m.account_id, type: 'phone', key: '+5511987650001' });
      const dup = await s.admin('POST', '/pix-keys', { account_id: m.account_id, type: 'phone', key: '+5511987650001' });
      expect(dup.status).toBe(409);
      expect(dup.body).toEqual({ errors: { conflict: 'PIX key is already registered' } });
    });

    it('POST /central-keys returns a key once and stores its digest', async () => {
      const res = await s.admin('POST', '/central-keys', { name: 'ERP integration' });
      expect(res.status).toBe(201);
      expect(res.body.api_key).toMatch(/^ck_[A-Za-z0-9_-]{43}$/);
      const rows = await s.ctx.db.query<{ key_hash: string }>('SELECT key_hash FROM central_api_keys');
      expect(rows.map((r) => r.key_hash)).toContain(secretDigest(res.body.api_key));
      expect(JSON.stringify(rows)).not.toContain(res.body.api_key);
      const bad = await s.admin('POST', '/central-keys', { name: '' });
      expect(bad.status).toBe(400);
      expect(bad.body).toEqual({ errors: { bad_request: { name: ["can't be blank"] } } });
    });
  });
});
