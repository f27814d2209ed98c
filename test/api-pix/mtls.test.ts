import { createHash, X509Certificate } from 'node:crypto';
import { readFileSync } from 'node:fs';
import https from 'node:https';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { packageRoot } from '../../src/lib/paths.js';
import { merchantWithKey, type MerchantFixture } from '../helpers/client.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

// The test server's certificate is self-signed: this file's own requests (the admin helper's
// fetch) accept it. Nothing leaves 127.0.0.1.
process.env.NODE_TLS_REJECT_UNAUTHORIZED = '0';

const dir = join(packageRoot, 'test', 'fixtures', 'tls');
const clientCert = readFileSync(join(dir, 'cert.pem'));
const clientKey = readFileSync(join(dir, 'key.pem'));
const fingerprint = createHash('sha256').update(new X509Certificate(clientCert).raw).digest('hex');

interface Answer {
  status: number;
  body: any;
}

/** A request over TLS, with or without the client certificate. */
function call(url: string, method: string, path: string, headers: Record<string, string>, body: string | undefined, withCert: boolean): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = https.request(`${url}${path}`, { method, headers, rejectUnauthorized: false, ...(withCert ? { cert: clientCert, key: clientKey } : {}) }, (res) => {
      let text = '';
      res.on('data', (c) => (text += c));
      res.on('end', () => resolve({ status: res.statusCode!, body: text ? JSON.parse(text) : null }));
    });
    req.on('error', reject);
    if (body !== undefined) req.write(body);
    req.end();
  });
}

const grant = (s: TestServer, m: MerchantFixture, withCert: boolean) =>
  call(
    s.url,
    'POST',
    '/api/pix/oauth/token',
    { authorization: `Basic ${Buffer.from(`${m.client.clientId}:${m.client.clientSecret}`).toString('base64')}`, 'content-type': 'application/x-www-form-urlencoded' },
    'grant_type=client_credentials&scope=cob.read',
    withCert,
  );
const read = (s: TestServer, token: string, withCert: boolean) => call(s.url, 'GET', '/api/pix/v2/nada', { authorization: `Bearer ${token}` }, undefined, withCert);

/** Mutual TLS of the API Pix façade: a client certificate bound to the API key (TLS configured). */
describe('API Pix mutual TLS', () => {
  let local: TestServer;
  let production: TestServer;
  const tlsEnv = { TLS_CERT_FILE: join(dir, 'cert.pem'), TLS_KEY_FILE: join(dir, 'key.pem') };
  beforeAll(async () => {
    local = await startTestServer({ env: tlsEnv });
    production = await startTestServer({ env: { ...tlsEnv, APP_ENV: 'homologation' }, workers: false });
  });
  afterAll(async () => {
    await production?.close();
    await local?.close();
  });

  it('local mode: no certificate bound, none needed', async () => {
    const m = await merchantWithKey(local);
    const res = await grant(local, m, false);
    expect(res.status).toBe(200);
    expect((await read(local, res.body.access_token, false)).status).toBe(404);
  });

  it('a bound certificate: granted only over it, and its tokens work only over it', async () => {
    const m = await merchantWithKey(local);
    const bound = await local.admin('PATCH', `/api-keys/${m.client.clientId}`, { api_pix_certificate_sha256: fingerprint.toUpperCase() });
    expect(bound.status).toBe(200);
    expect(bound.body.api_pix_certificate_sha256).toBe(fingerprint);
    const without = await grant(local, m, false);
    expect(without.status).toBe(401);
    expect(without.body).toEqual({ error: 'invalid_client', error_description: 'O certificado TLS do cliente não é o vinculado à chave de API' });
    const withCert = await grant(local, m, true);
    expect(withCert.status).toBe(200);
    expect((await read(local, withCert.body.access_token, true)).status).toBe(404);
    const stolen = await read(local, withCert.body.access_token, false);
    expect(stolen.status).toBe(401);
    // Bound to another certificate: the tokens granted over this one stop at once.
    await local.admin('PATCH', `/api-keys/${m.client.clientId}`, { api_pix_certificate_sha256: 'ab'.repeat(32) });
    expect((await read(local, withCert.body.access_token, true)).status).toBe(401);
  });

  it('outside local mode, with TLS configured, a key without a bound certificate is refused', async () => {
    const m = await merchantWithKey(production);
    const res = await grant(production, m, true);
    expect(res.status).toBe(401);
    expect(res.body.error_description).toContain('TLS mútuo');
    await production.admin('PATCH', `/api-keys/${m.client.clientId}`, { api_pix_certificate_sha256: fingerprint });
    expect((await grant(production, m, true)).status).toBe(200);
  });
});
