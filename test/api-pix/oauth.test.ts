import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SCOPES } from '../../src/apiPix/scopes.js';
import { PixClient, pixClientFor, requestToken } from '../helpers/apiPix.js';
import { merchantWithKey } from '../helpers/client.js';
import { BACKENDS, openTestDatabase, secondHandle, type TestDatabase } from '../helpers/db.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

const PROBLEM = 'application/problem+json';

/**
 * POST /api/pix/oauth/token (OAuth2 client credentials over a pixgate API key) and the bearer
 * pipeline of /api/pix/v2: grants, refusals, and tokens that stop working with their key — on
 * another app instance over the same database too (two processes' worth of caches).
 */
describe.each(BACKENDS)('API Pix OAuth2 on %s', (backend) => {
  let a: TestServer;
  let b: TestServer;
  let shared: TestDatabase;
  let bDatabase: TestDatabase;
  const env = { AUTH_CACHE_TTL_MS: '60000' };

  beforeAll(async () => {
    shared = await openTestDatabase(backend);
    bDatabase = await secondHandle(shared);
    a = await startTestServer({ database: shared, env });
    b = await startTestServer({ database: bDatabase, env, workers: false });
  });
  afterAll(async () => {
    await b?.close();
    await a?.close();
    if (bDatabase !== shared) await bDatabase?.close();
    await shared?.close();
  });

  /** `change`'s result once B has heard `payload` on auth_changed (see test/pipeline/auth-cache.test.ts). */
  async function heardOnB<T>(payload: string, change: () => Promise<T>): Promise<T> {
    let heard!: () => void;
    const delivered = new Promise<void>((resolve) => (heard = resolve));
    const unsubscribe = await bDatabase.db.listen('auth_changed', (p) => {
      if (p === payload) heard();
    });
    try {
      const result = await change();
      await delivered;
      return result;
    } finally {
      await unsubscribe();
    }
  }

  it('grants every scope the key’s permissions allow, with no-store headers; the token is stored only as a digest', async () => {
    const m = await merchantWithKey(a);
    const res = await requestToken(a.url, m.client.clientId, m.client.clientSecret);
    expect(res.status).toBe(200);
    expect(res.headers.get('cache-control')).toBe('no-store');
    expect(res.body).toEqual({ access_token: expect.stringMatching(/^pxa_[A-Za-z0-9_-]{43}$/), token_type: 'Bearer', expires_in: 600, scope: SCOPES.join(' ') });
    const rows = await a.ctx.db.query<{ token_hash: string }>('SELECT token_hash FROM api_pix_tokens WHERE client_id = $1', [m.client.clientId]);
    expect(rows).toHaveLength(1);
    expect(rows[0]!.token_hash).toMatch(/^[0-9a-f]{64}$/);
    expect(rows[0]!.token_hash).not.toContain(res.body.access_token);
  });

  it('grants the requested scopes only (repeats and extra spaces ignored); a JSON body is accepted too', async () => {
    const m = await merchantWithKey(a);
    const res = await requestToken(a.url, m.client.clientId, m.client.clientSecret, { grant_type: 'client_credentials', scope: ' cob.read  cob.write cob.read ' });
    expect(res.status).toBe(200);
    expect(res.body.scope).toBe('cob.read cob.write');
    const json = await fetch(`${a.url}/api/pix/oauth/token`, {
      method: 'POST',
      headers: { authorization: `Basic ${Buffer.from(`${m.client.clientId}:${m.client.clientSecret}`).toString('base64')}`, 'content-type': 'application/json' },
      body: JSON.stringify({ grant_type: 'client_credentials', scope: 'payloadlocation.read' }),
    });
    expect(json.status).toBe(200);
    expect(((await json.json()) as { scope: string }).scope).toBe('payloadlocation.read');
  });

  it('a key with pix:read only is granted the read scopes of charges, locations and Pix', async () => {
    const m = await merchantWithKey(a, { permissions: ['pix:read'] });
    const res = await requestToken(a.url, m.client.clientId, m.client.clientSecret);
    expect(res.status).toBe(200);
    expect(res.body.scope).toBe('cob.read cobv.read lotecobv.read payloadlocation.read pix.read');
  });

  it('refuses: wrong secret, unknown client, no credentials (401 invalid_client with a Basic challenge)', async () => {
    const m = await merchantWithKey(a);
    for (const res of [
      await requestToken(a.url, m.client.clientId, 'sk_wrong'),
      await requestToken(a.url, 'cli_doesnotexist', m.client.clientSecret),
      await requestToken(a.url, m.client.clientId, m.client.clientSecret, { grant_type: 'client_credentials' }, { authorization: '' }),
    ]) {
      expect(res.status).toBe(401);
      expect(res.body.error).toBe('invalid_client');
      expect(typeof res.body.error_description).toBe('string');
      expect(res.headers.get('www-authenticate')).toBe('Basic realm="api-pix"');
    }
  });

  it('refuses: unknown scope, scope beyond the key’s permissions, no grantable scope (400 invalid_scope)', async () => {
    const m = await merchantWithKey(a, { permissions: ['pix:read'] });
    const unknown = await requestToken(a.url, m.client.clientId, m.client.clientSecret, { grant_type: 'client_credentials', scope: 'cob.read cob.admin' });
    expect(unknown.status).toBe(400);
    expect(unknown.body).toEqual({ error: 'invalid_scope', error_description: 'Escopo desconhecido: cob.admin' });
    const beyond = await requestToken(a.url, m.client.clientId, m.client.clientSecret, { grant_type: 'client_credentials', scope: 'cob.read cob.write' });
    expect(beyond.status).toBe(400);
    expect(beyond.body).toEqual({ error: 'invalid_scope', error_description: 'As permissões da chave de API não permitem o escopo cob.write' });
    const none = await merchantWithKey(a, { permissions: ['transfer:read'] });
    const nothing = await requestToken(a.url, none.client.clientId, none.client.clientSecret);
    expect(nothing.status).toBe(400);
    expect(nothing.body.error).toBe('invalid_scope');
  });

  it('refuses: grant_type missing or other (400), a body that is not a form (400 invalid_request)', async () => {
    const m = await merchantWithKey(a);
    const missing = await requestToken(a.url, m.client.clientId, m.client.clientSecret, {});
    expect(missing.status).toBe(400);
    expect(missing.body.error).toBe('invalid_request');
    const other = await requestToken(a.url, m.client.clientId, m.client.clientSecret, { grant_type: 'password' });
    expect(other.status).toBe(400);
    expect(other.body.error).toBe('unsupported_grant_type');
    const broken = await requestToken(a.url, m.client.clientId, m.client.clientSecret, { grant_type: 'client_credentials' }, { 'content-type': 'application/json' });
    expect(broken.status).toBe(400);
    expect(broken.body.error).toBe('invalid_request');
  });

  it('refuses a key whose IP whitelist leaves the caller out (403 access_denied), and a revoked key (401)', async () => {
    const far = await merchantWithKey(a, { ipWhitelist: ['203.0.113.7'] });
    const res = await requestToken(a.url, far.client.clientId, far.client.clientSecret);
    expect(res.status).toBe(403);
    expect(res.body.error).toBe('access_denied');
    const m = await merchantWithKey(a);
    expect((await a.admin('POST', `/api-keys/${m.client.clientId}/revoke`)).status).toBe(200);
    const revoked = await requestToken(a.url, m.client.clientId, m.client.clientSecret);
    expect(revoked.status).toBe(401);
    expect(revoked.body.error).toBe('invalid_client');
  });

  it('401 problem without a token and with an unknown one (WWW-Authenticate: Bearer)', async () => {
    const none = await fetch(`${a.url}/api/pix/v2/cob/abc`);
    expect(none.status).toBe(401);
    expect(none.headers.get('content-type')).toContain(PROBLEM);
    expect(none.headers.get('www-authenticate')).toBe('Bearer realm="api-pix"');
    expect(await none.json()).toEqual({ type: 'about:blank', title: 'Não autorizado', status: 401, detail: expect.any(String) });
    const unknown = await new PixClient(a.url, 'pxa_unknown').get('/loc?inicio=2020-01-01T00:00:00Z&fim=2020-01-02T00:00:00Z');
    expect(unknown.status).toBe(401);
    expect(unknown.headers.get('www-authenticate')).toContain('error="invalid_token"');
    expect(unknown.body.type).toBe('about:blank');
  });

  it('an unknown path under /api/pix/v2 is authenticated first, then 404 NaoEncontrado', async () => {
    const m = await merchantWithKey(a);
    const client = await pixClientFor(a.url, m);
    const res = await client.get('/nada/aqui');
    expect(res.status).toBe(404);
    expect(res.headers.get('content-type')).toContain(PROBLEM);
    expect(res.body).toEqual({ type: 'https://pix.bcb.gov.br/api/v2/error/NaoEncontrado', title: 'Não encontrado', status: 404, detail: expect.any(String) });
  });

  it('revoking the key on A ends its tokens at once on B (another instance, its own cache)', async () => {
    const m = await merchantWithKey(a);
    const onB = await pixClientFor(b.url, m);
    expect((await onB.get('/nada')).status).toBe(404); // B now holds the key in its cache
    await heardOnB(`key:${m.client.clientId}`, () => a.admin('POST', `/api-keys/${m.client.clientId}/revoke`));
    const res = await onB.get('/nada');
    expect(res.status).toBe(401);
    expect(res.body.type).toBe('about:blank');
    expect(res.headers.get('www-authenticate')).toContain('invalid_token');
  });

  it('a whitelist patched after the grant refuses the token at once (403 AcessoNegado)', async () => {
    const m = await merchantWithKey(a);
    const onB = await pixClientFor(b.url, m);
    expect((await onB.get('/nada')).status).toBe(404);
    await heardOnB(`key:${m.client.clientId}`, () => a.admin('PATCH', `/api-keys/${m.client.clientId}`, { ip_whitelist: ['203.0.113.7'] }));
    const res = await onB.get('/nada');
    expect(res.status).toBe(403);
    expect(res.body).toEqual({ type: 'https://pix.bcb.gov.br/api/v2/error/AcessoNegado', title: 'Acesso negado', status: 403, detail: expect.any(String) });
  });

  it('a token past its expiry is refused (401)', async () => {
    const m = await merchantWithKey(a);
    const client = await pixClientFor(a.url, m);
    await a.ctx.db.query(`UPDATE api_pix_tokens SET issued_at = issued_at - interval '1 hour', expires_at = now() - interval '1 second' WHERE client_id = $1`, [m.client.clientId]);
    const res = await client.get('/nada');
    expect(res.status).toBe(401);
  });
});
