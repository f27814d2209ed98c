import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { revokeKey, rotateKey } from '../../src/auth/keyLifecycle.js';
import type { Actor } from '../../src/auth/merchantAudit.js';
import { ApiClient, merchantWithKey, type MerchantFixture } from '../helpers/client.js';
import { BACKENDS, openTestDatabase, secondHandle, type TestDatabase } from '../helpers/db.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

/**
 * A rotation and a revocation made by process A, seen by process B whose credential cache holds
 * the key (on PostgreSQL two pools of their own, as two processes; on PGlite two apps on the one
 * database). The cache TTL is a minute, so only the auth_changed notification can make B see the
 * new secret; the grace's end needs no notification at all (the clock moves, nothing is written).
 */
describe.each(BACKENDS)('key rotation across two app instances on %s', (backend) => {
  let a: TestServer;
  let b: TestServer;
  let shared: TestDatabase;
  let bDatabase: TestDatabase;
  let offsetMs = 0;
  const clock = { now: () => new Date(Date.now() + offsetMs) };
  const env = { AUTH_CACHE_TTL_MS: '60000' };
  const actor: Actor = { type: 'member', id: '1', ip: '127.0.0.1' };

  beforeAll(async () => {
    shared = await openTestDatabase(backend);
    bDatabase = await secondHandle(shared);
    a = await startTestServer({ database: shared, env, clock });
    b = await startTestServer({ database: bDatabase, env, clock, workers: false });
  });
  afterAll(async () => {
    await b?.close();
    await a?.close();
    if (bDatabase !== shared) await bDatabase?.close();
    await shared?.close();
  });

  /** `change`, answered once B has heard `key:<clientId>` on auth_changed. */
  async function heardOnB<T>(clientId: string, change: () => Promise<T>): Promise<T> {
    let heard!: () => void;
    const delivered = new Promise<void>((resolve) => (heard = resolve));
    const unsubscribe = await bDatabase.db.listen('auth_changed', (p) => {
      if (p === `key:${clientId}`) heard();
    });
    try {
      const result = await change();
      await delivered;
      return result;
    } finally {
      await unsubscribe();
    }
  }

  const onB = (m: MerchantFixture, secret: string) => new ApiClient(b.url, m.client.clientId, secret);

  it('during the grace both secrets answer on B, after it only the new one (on A and B)', async () => {
    const m = await merchantWithKey(a);
    const old = m.client.clientSecret;
    expect((await onB(m, old).get('/balance')).status).toBe(200); // B caches the key
    const { clientSecret: fresh } = await heardOnB(m.client.clientId, () => rotateKey(a.ctx, actor, m.merchantId, m.client.clientId, 3600));
    expect((await onB(m, fresh).get('/balance')).status).toBe(200);
    expect((await onB(m, old).get('/balance')).status).toBe(200);
    offsetMs += 3600_000 + 1_000; // the grace is over; nothing is written anywhere
    try {
      const refused = await onB(m, old).get('/balance');
      expect(refused.status).toBe(401);
      expect(refused.body).toEqual({ error: { status: 401, message: expect.any(String) } });
      expect((await new ApiClient(a.url, m.client.clientId, old).get('/balance')).status).toBe(401);
      expect((await onB(m, fresh).get('/balance')).status).toBe(200);
    } finally {
      offsetMs -= 3600_000 + 1_000;
    }
  });

  it('a revocation on A is refused by B at once, the secret in grace too', async () => {
    const m = await merchantWithKey(a);
    const old = m.client.clientSecret;
    const { clientSecret: fresh } = await heardOnB(m.client.clientId, () => rotateKey(a.ctx, actor, m.merchantId, m.client.clientId, 3600));
    expect((await onB(m, fresh).get('/balance')).status).toBe(200);
    expect((await onB(m, old).get('/balance')).status).toBe(200);
    await heardOnB(m.client.clientId, () => revokeKey(a.ctx, actor, m.merchantId, m.client.clientId));
    expect((await onB(m, fresh).get('/balance')).body).toEqual({ error: { status: 401, message: 'API key is inactive' } });
    expect((await onB(m, old).get('/balance')).status).toBe(401);
  });

  it('records the last use of a key from its API calls', async () => {
    const m = await merchantWithKey(a);
    expect((await m.client.get('/balance')).status).toBe(200);
    await expect
      .poll(async () => (await a.ctx.db.query<{ last_used_ip: string }>('SELECT last_used_ip FROM api_key_usage WHERE client_id = $1', [m.client.clientId]))[0]?.last_used_ip)
      .toMatch(/127\.0\.0\.1|::1/);
  });
});
