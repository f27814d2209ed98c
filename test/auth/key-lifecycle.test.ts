import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { authenticate } from '../../src/auth/credentials.js';
import { createKey, endGraces, listKeys, MAX_GRACE_SECONDS, revokeKey, rotateKey } from '../../src/auth/keyLifecycle.js';
import { KeyUsageRecorder, recordUse, USAGE_WRITE_INTERVAL_MS } from '../../src/auth/keyUsage.js';
import { findKeyForAuth } from '../../src/auth/apiKeys.js';
import type { Actor } from '../../src/auth/merchantAudit.js';
import { createMerchant } from '../../src/merchants/service.js';
import { BACKENDS, openTestDatabase, type TestDatabase } from '../helpers/db.js';
import { validCnpj } from '../helpers/fixtures.js';

/**
 * The API key lifecycle of the portal (src/auth/keyLifecycle.ts) on the database: each change with
 * its api_key.* event and its audit row, the grace of a rotation against the clock, revocation,
 * the end of a grace, and the last-use record written at most once a minute.
 */
describe.each(BACKENDS)('API key lifecycle on %s', (backend) => {
  let t: TestDatabase;
  let now = new Date('2026-11-27T12:00:00Z');
  const clock = { now: () => now };
  const actor: Actor = { type: 'member', id: '7', label: 'ana@example.com', ip: '203.0.113.9' };
  let merchantId: number;
  let accountId: number;
  const deps = () => ({ db: t.db, clock });

  beforeAll(async () => {
    t = await openTestDatabase(backend);
    const m = await createMerchant(t.db, { name: 'Loja', document: validCnpj() });
    merchantId = Number(m.merchant.id);
    accountId = Number(m.account.id);
  });
  afterAll(async () => t?.close());

  const auth = (clientId: string, secret: string) => authenticate((id) => findKeyForAuth(t.db, id), clock, `ApiKey ${clientId}:${secret}`);
  const events = (clientId: string) =>
    t.db.query<{ event: string; payload: Record<string, unknown> }>('SELECT event, payload FROM outbox_events WHERE subject = $1 ORDER BY id', [clientId]);
  const audit = (clientId: string) =>
    t.db.query<{ action: string; actor: string; client_ip: string }>(`SELECT action, actor, client_ip FROM merchant_audit_log WHERE target->>'client_id' = $1 ORDER BY id`, [clientId]);
  const create = () => createKey(deps(), actor, { merchantId, accountId, name: 'ERP', permissions: ['account:read'], ipWhitelist: ['127.0.0.1'] });

  it('creates a key with its api_key.created event and audit row; the secret is in neither', async () => {
    const { key, clientSecret } = await create();
    expect('key' in (await auth(key.client_id, clientSecret))).toBe(true);
    const [e] = await events(key.client_id);
    expect(e).toMatchObject({ event: 'api_key.created' });
    expect(e!.payload).toMatchObject({ event: 'api_key.created', client_id: key.client_id, name: 'ERP', status: 'active', account_id: accountId, actor: { type: 'member', id: '7' } });
    expect(JSON.stringify(e!.payload)).not.toContain(clientSecret);
    expect(JSON.stringify(e!.payload)).not.toContain(key.secret_hash);
    expect(await audit(key.client_id)).toEqual([{ action: 'api_key.created', actor: 'member:7 (ana@example.com)', client_ip: '203.0.113.9' }]);
  });

  it('rotates with a grace: both secrets pass until its end, then only the new one', async () => {
    const { key, clientSecret: old } = await create();
    const { clientSecret: fresh, key: rotated } = await rotateKey(deps(), actor, merchantId, key.client_id, 3600);
    expect(rotated.previous_secret_expires_at!.toISOString()).toBe(new Date(now.getTime() + 3600_000).toISOString());
    expect('key' in (await auth(key.client_id, old))).toBe(true);
    expect('key' in (await auth(key.client_id, fresh))).toBe(true);
    const start = now;
    try {
      now = new Date(start.getTime() + 3600_000); // the grace's last instant is past
      expect(await auth(key.client_id, old)).toEqual({ refused: 'invalidCredentials' });
      expect('key' in (await auth(key.client_id, fresh))).toBe(true);
      const ended = await endGraces(deps(), merchantId);
      expect(ended.map((k) => k.client_id)).toContain(key.client_id);
      expect((await endGraces(deps(), merchantId)).map((k) => k.client_id)).not.toContain(key.client_id); // once
    } finally {
      now = start;
    }
    const names = (await events(key.client_id)).map((e) => e.event);
    expect(names).toEqual(['api_key.created', 'api_key.rotated', 'api_key.rotation_completed']);
    const rotatedEvent = (await events(key.client_id))[1]!.payload;
    expect(rotatedEvent).toMatchObject({ grace_seconds: 3600, previous_secret_expires_at: rotated.previous_secret_expires_at!.toISOString() });
    expect((await audit(key.client_id)).map((a) => a.action)).toEqual(names);
    // After the sweep, the digest is gone too (even a clock moved back cannot revive it).
    expect(await auth(key.client_id, old)).toEqual({ refused: 'invalidCredentials' });
  });

  it('a rotation without grace refuses the old secret at once; a second rotation drops the first old secret', async () => {
    const { key, clientSecret: first } = await create();
    const { clientSecret: second } = await rotateKey(deps(), actor, merchantId, key.client_id, 0);
    expect(await auth(key.client_id, first)).toEqual({ refused: 'invalidCredentials' });
    const { clientSecret: third } = await rotateKey(deps(), actor, merchantId, key.client_id, 600);
    expect('key' in (await auth(key.client_id, second))).toBe(true);
    await rotateKey(deps(), actor, merchantId, key.client_id, 600);
    expect(await auth(key.client_id, second)).toEqual({ refused: 'invalidCredentials' });
    expect('key' in (await auth(key.client_id, third))).toBe(true);
  });

  it('bounds the grace and refuses another merchant’s key and a revoked key, writing nothing', async () => {
    const { key } = await create();
    await expect(rotateKey(deps(), actor, merchantId, key.client_id, MAX_GRACE_SECONDS + 1)).rejects.toMatchObject({ code: 'unprocessable_entity' });
    await expect(rotateKey(deps(), actor, merchantId, key.client_id, -1)).rejects.toMatchObject({ code: 'unprocessable_entity' });
    await expect(rotateKey(deps(), actor, merchantId + 1000, key.client_id, 60)).rejects.toMatchObject({ code: 'not_found' });
    await expect(revokeKey(deps(), actor, merchantId + 1000, key.client_id)).rejects.toMatchObject({ code: 'not_found' });
    await revokeKey(deps(), actor, merchantId, key.client_id);
    await expect(rotateKey(deps(), actor, merchantId, key.client_id, 60)).rejects.toMatchObject({ code: 'conflict' });
    expect((await events(key.client_id)).map((e) => e.event)).toEqual(['api_key.created', 'api_key.revoked']);
  });

  it('revokes at once, the secret in grace too; revoking again fires nothing', async () => {
    const { key, clientSecret: old } = await create();
    const { clientSecret: fresh } = await rotateKey(deps(), actor, merchantId, key.client_id, 3600);
    const revoked = await revokeKey(deps(), actor, merchantId, key.client_id);
    expect(revoked).toMatchObject({ active: false, previous_secret_hash: null });
    expect(await auth(key.client_id, fresh)).toEqual({ refused: 'inactiveKey' });
    expect(await auth(key.client_id, old)).toEqual({ refused: 'invalidCredentials' });
    await revokeKey(deps(), actor, merchantId, key.client_id);
    const names = (await events(key.client_id)).map((e) => e.event);
    expect(names).toEqual(['api_key.created', 'api_key.rotated', 'api_key.revoked']);
    expect((await events(key.client_id))[2]!.payload).toMatchObject({ status: 'revoked' });
  });

  it('records the last use at most once a minute per key, in this process and across processes', async () => {
    const { key } = await create();
    let mono = 0;
    const recorder = new KeyUsageRecorder(t.db, { now: () => mono });
    await recorder.record(key.client_id, '198.51.100.1', now);
    expect(recorder.record(key.client_id, '198.51.100.2', new Date(now.getTime() + 1000))).toBeNull(); // within the minute: no statement
    mono += USAGE_WRITE_INTERVAL_MS - 1;
    expect(recorder.record(key.client_id, '198.51.100.2', new Date(now.getTime() + 59_000))).toBeNull();
    expect(recorder.writes).toBe(1);
    let [listed] = (await listKeys(t.db, merchantId)).filter((k) => k.client_id === key.client_id);
    expect(listed).toMatchObject({ last_used_ip: '198.51.100.1', last_used_at: now });
    // Another process writes 30 s later: the row is younger than a minute and stays.
    await recordUse(t.db, key.client_id, '198.51.100.3', new Date(now.getTime() + 30_000));
    [listed] = (await listKeys(t.db, merchantId)).filter((k) => k.client_id === key.client_id);
    expect(listed!.last_used_ip).toBe('198.51.100.1');
    mono += 1;
    await recorder.record(key.client_id, '198.51.100.4', new Date(now.getTime() + 61_000));
    expect(recorder.writes).toBe(2);
    [listed] = (await listKeys(t.db, merchantId)).filter((k) => k.client_id === key.client_id);
    expect(listed).toMatchObject({ last_used_ip: '198.51.100.4', last_used_at: new Date(now.getTime() + 61_000) });
  });

  it('recording a use does not touch api_keys (no auth_changed: the credential caches keep their entries)', async () => {
    const { key } = await create();
    const heard: string[] = [];
    const unsubscribe = await t.db.listen('auth_changed', (p) => heard.push(p ?? ''));
    try {
      await recordUse(t.db, key.client_id, '192.0.2.1', now);
      await revokeKey(deps(), actor, merchantId, key.client_id); // a change that does notify, as the fence
      await expect.poll(() => heard.length).toBeGreaterThan(0);
      expect(heard).toEqual([`key:${key.client_id}`]);
    } finally {
      await unsubscribe();
    }
  });
});
