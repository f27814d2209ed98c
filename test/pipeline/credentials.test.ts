import { describe, expect, it } from 'vitest';
import { BACKENDS } from '../helpers/db.js';
import { ApiClient, merchantWithKey, type MerchantFixture } from '../helpers/client.js';
import type { TestServer } from '../helpers/server.js';
import { withPipelineServer } from './testRoutes.js';

const SHAPE1 = (status: number, message: string) => ({ error: { status, message } });

describe.each(BACKENDS)('pipeline stage 3, credentials, on %s', (backend) => {
  let s: TestServer;
  let m: MerchantFixture;
  withPipelineServer({ backend }, (server, merchant) => {
    s = server;
    m = merchant;
  });

  const raw = (headers: Record<string, string>) => fetch(`${s.url}/api/external/test/ping`, { headers });

  it('accepts Authorization: ApiKey <client_id>:<client_secret>', async () => {
    expect((await m.client.get('/test/ping')).status).toBe(200);
  });

  it('accepts Authorization: Basic base64(client_id:client_secret), any scheme case', async () => {
    const basic = Buffer.from(`${m.client.clientId}:${m.client.clientSecret}`).toString('base64');
    expect((await raw({ authorization: `Basic ${basic}` })).status).toBe(200);
    expect((await raw({ authorization: `basic ${basic}` })).status).toBe(200);
    expect((await raw({ authorization: `apikey ${m.client.clientId}:${m.client.clientSecret}` })).status).toBe(200);
  });

  it('401 "Missing API key credentials…" without credentials or with another scheme', async () => {
    for (const headers of [{}, { authorization: 'Bearer abc' }, { authorization: '' }]) {
      const res = await raw(headers as Record<string, string>);
      expect(res.status).toBe(401);
      expect(await res.json()).toEqual(SHAPE1(401, 'Missing API key credentials. Use Authorization: ApiKey <client_id>:<client_secret>'));
    }
  });

  it('401 "Invalid API key credentials" for a wrong secret, an unknown client id, or a malformed value', async () => {
    for (const authorization of [
      `ApiKey ${m.client.clientId}:sk_wrong`,
      `ApiKey ${m.client.clientId}:${m.client.clientSecret}x`,
      `ApiKey cli_unknown:${m.client.clientSecret}`,
      `ApiKey ${m.client.clientId}`,
      `Basic ${Buffer.from(m.client.clientId).toString('base64')}`,
      'Basic !!!',
    ]) {
      const res = await raw({ authorization });
      expect(res.status, authorization).toBe(401);
      expect(await res.json()).toEqual(SHAPE1(401, 'Invalid API key credentials'));
    }
  });

  it('401 "API key is inactive" for a revoked key', async () => {
    const k = await merchantWithKey(s);
    expect((await s.admin('POST', `/api-keys/${k.client.clientId}/revoke`)).status).toBe(200);
    const res = await k.client.get('/test/ping');
    expect(res.status).toBe(401);
    expect(res.body).toEqual(SHAPE1(401, 'API key is inactive'));
  });

  it('401 "API key has expired" for a key whose expires_at is past; a future expiry works', async () => {
    const expired = await merchantWithKey(s, { expiresAt: '2020-01-01T00:00:00Z' });
    const res = await expired.client.get('/test/ping');
    expect(res.status).toBe(401);
    expect(res.body).toEqual(SHAPE1(401, 'API key has expired'));
    const future = await merchantWithKey(s, { expiresAt: '2999-01-01T00:00:00Z' });
    expect((await future.client.get('/test/ping')).status).toBe(200);
  });

  it('a revoked key with a wrong secret still answers "Invalid API key credentials" (nothing revealed)', async () => {
    const k = await merchantWithKey(s);
    await s.admin('POST', `/api-keys/${k.client.clientId}/revoke`);
    const res = await new ApiClient(s.url, k.client.clientId, 'sk_guess').get('/test/ping');
    expect(res.body).toEqual(SHAPE1(401, 'Invalid API key credentials'));
  });
});
