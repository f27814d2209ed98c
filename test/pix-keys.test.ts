import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { addPixKey, merchantWithKey, type MerchantFixture } from './helpers/client.js';
import { BACKENDS } from './helpers/db.js';
import { startTestServer, type TestServer } from './helpers/server.js';

describe.each(BACKENDS)('GET /pix/keys on %s', (backend) => {
  let s: TestServer;
  let m: MerchantFixture;
  let email: string;
  let evp: string;
  beforeAll(async () => {
    s = await startTestServer({ backend });
    m = await merchantWithKey(s);
    email = await addPixKey(s, m.accountId, 'email', `loja${m.accountId}@example.com`);
    evp = await addPixKey(s, m.accountId, 'evp');
    // Another account's key is never listed.
    const other = await merchantWithKey(s);
    await addPixKey(s, other.accountId, 'evp');
  });
  afterAll(async () => s?.close());

  it('GET /pix/keys lists the account’s keys with type, key, status and creation date', async () => {
    const res = await m.client.get('/pix/keys');
    expect(res.status).toBe(200);
    expect(res.body).toEqual({
      worked: true,
      data: [
        { type: 'email', key: email, status: 'active', created_at: expect.stringMatching(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/) },
        { type: 'evp', key: evp, status: 'active', created_at: expect.stringMatching(/Z$/) },
      ],
    });
    const [row] = await s.ctx.db.query<{ created_at: Date }>('SELECT created_at FROM pix_keys WHERE key = $1', [evp]);
    expect(res.body.data[1].created_at).toBe(row!.created_at.toISOString());

    // An inactive key is listed with its status.
    await s.ctx.db.query("UPDATE pix_keys SET status = 'inactive' WHERE key = $1", [email]);
    expect((await m.client.get('/pix/keys')).body.data.map((k: { status: string }) => k.status)).toEqual(['inactive', 'active']);
    await s.ctx.db.query("UPDATE pix_keys SET status = 'active' WHERE key = $1", [email]);
    const camel = await m.client.get('/pix/keys', { camelCase: true });
    expect(camel.body.data[0]).toEqual({ type: 'email', key: email, status: 'active', createdAt: res.body.data[0].created_at });
  });

  it('GET /pix/keys: empty list for an account without keys; needs pix:read; other accounts’ keys are not shown', async () => {
    const bare = await merchantWithKey(s, { permissions: ['pix:read'] });
    expect((await bare.client.get('/pix/keys')).body).toEqual({ worked: true, data: [] });
    const writer = await merchantWithKey(s, { permissions: ['pix:write'] });
    const res = await writer.client.get('/pix/keys');
    expect(res.status).toBe(403);
    expect(res.body).toEqual({ error: 'forbidden', message: 'API key lacks permission: pix:read' });
  });
});
