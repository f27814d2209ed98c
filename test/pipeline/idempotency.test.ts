import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { IdempotencyLostError, IdempotencyStore, requestHash } from '../../src/external/idempotency.js';
import { BACKENDS } from '../helpers/db.js';
import { merchantWithKey, type MerchantFixture } from '../helpers/client.js';
import type { TestServer } from '../helpers/server.js';
import { executions, withPipelineServer } from './testRoutes.js';

describe.each(BACKENDS)('pipeline stage 8, idempotency, on %s', (backend) => {
  let s: TestServer;
  let m: MerchantFixture;
  withPipelineServer({ backend }, (server, merchant) => {
    s = server;
    m = merchant;
  });

  const key = () => `idem-${randomUUID()}`;

  it('a repeat replays the same status and byte-identical body with X-Idempotent-Replay and the key echoed', async () => {
    const k = key();
    const before = await executions(s.ctx, m.client.clientId);
    const first = await m.client.post('/test/execute', { amount: 1 }, { idempotencyKey: k });
    expect(first.status).toBe(201);
    expect(first.headers.get('x-idempotent-replay')).toBeNull();
    // Key order and whitespace do not make it another request.
    const again = await m.client.post('/test/execute', '{ "amount" : 1 }', { idempotencyKey: k });
    expect(again.status).toBe(201);
    expect(again.text).toBe(first.text);
    expect(again.headers.get('x-idempotent-replay')).toBe('true');
    expect(again.headers.get('idempotency-key')).toBe(k);
    expect(await executions(s.ctx, m.client.clientId)).toBe(before + 1);
  });

  it('replays camelCase answers byte for byte', async () => {
    const k = key();
    const first = await m.client.post('/test/execute', { amountCents: 1 }, { idempotencyKey: k, camelCase: true });
    const again = await m.client.post('/test/execute', { amountCents: 1 }, { idempotencyKey: k, camelCase: true });
    expect(first.body).toEqual({ worked: true, executionId: expect.any(Number) });
    expect(again.text).toBe(first.text);
  });

  it('400 "Idempotency-Key must be at most 256 characters"; 256 is accepted', async () => {
    const res = await m.client.post('/test/execute', { a: 1 }, { idempotencyKey: 'k'.repeat(257) });
    expect(res.status).toBe(400);
    expect(res.body).toEqual({ error: { status: 400, message: 'Idempotency-Key must be at most 256 characters' } });
    expect((await m.client.post('/test/execute', { a: 1 }, { idempotencyKey: 'k'.repeat(256) })).status).toBe(201);
  });

  it('GET ignores the header silently', async () => {
    const res = await m.client.get('/test/ping', { headers: { 'idempotency-key': 'k'.repeat(300) } });
    expect(res.status).toBe(200);
    expect(res.headers.get('x-idempotent-replay')).toBeNull();
  });

  it('only 2xx answers are kept: after a 4xx the same key runs the operation', async () => {
    const k = key();
    const before = await executions(s.ctx, m.client.clientId);
    const failed = await m.client.post('/test/execute?fail=1', { a: 1 }, { idempotencyKey: k });
    expect(failed.status).toBe(422);
    const retried = await m.client.post('/test/execute', { a: 1 }, { idempotencyKey: k });
    expect(retried.status).toBe(201);
    expect(retried.headers.get('x-idempotent-replay')).toBeNull();
    expect(await executions(s.ctx, m.client.clientId)).toBe(before + 1);
  });

  it('409 when the key was used with a different body', async () => {
    const k = key();
    await m.client.post('/test/execute', { a: 1 }, { idempotencyKey: k });
    const res = await m.client.post('/test/execute', { a: 2 }, { idempotencyKey: k });
    expect(res.status).toBe(409);
    expect(res.body).toEqual({ error: { status: 409, message: 'Idempotency-Key was already used with a different request body' } });
  });

  it('the scope is merchant + method + path + key', async () => {
    const k = key();
    const other = await merchantWithKey(s);
    const a = await m.client.post('/test/execute', { a: 1 }, { idempotencyKey: k });
    const b = await other.client.post('/test/execute', { a: 1 }, { idempotencyKey: k });
    expect(b.headers.get('x-idempotent-replay')).toBeNull();
    expect(b.body.execution_id).not.toBe(a.body.execution_id);
    const echo = await m.client.post('/test/echo', { a: 1 }, { idempotencyKey: k });
    expect(echo.status).toBe(200);
    expect(echo.headers.get('x-idempotent-replay')).toBeNull();
  });

  it('permission is checked before a replay: a revoked permission gets 403 even when cached', async () => {
    const k = await merchantWithKey(s);
    const ik = key();
    expect((await k.client.post('/test/execute', { a: 1 }, { idempotencyKey: ik })).status).toBe(201);
    await s.admin('PATCH', `/api-keys/${k.client.clientId}`, { permissions: ['account:read'] });
    const res = await k.client.post('/test/execute', { a: 1 }, { idempotencyKey: ik });
    expect(res.status).toBe(403);
    expect(res.body).toEqual({ error: 'forbidden', message: 'API key lacks permission: transfer:write' });
  });

  it('20 simultaneous POSTs with one key execute the operation once; all get the same answer', async () => {
    const k = key();
    const before = await executions(s.ctx, m.client.clientId);
    const results = await Promise.all(Array.from({ length: 20 }, () => m.client.post('/test/execute', { burst: true }, { idempotencyKey: k })));
    expect(results.map((r) => r.status)).toEqual(Array(20).fill(201));
    expect(new Set(results.map((r) => r.text)).size).toBe(1);
    expect(results.filter((r) => r.headers.get('x-idempotent-replay') === 'true')).toHaveLength(19);
    expect(await executions(s.ctx, m.client.clientId)).toBe(before + 1);
  });

  it('a claim abandoned by a crashed request is taken over after its lease; an expired record is forgotten', async () => {
    const k = key();
    const path = '/api/external/test/execute';
    await s.ctx.db.query(
      `INSERT INTO idempotency_keys (merchant_id, method, path, key, request_hash, status, owner_token, locked_until, expires_at)
       VALUES ($1, 'POST', $2, $3, $4, 'in_progress', $5, now() - interval '1 second', now() + interval '1 day')`,
      [m.merchantId, path, k, requestHash('{"a":1}'), randomUUID()],
    );
    const res = await m.client.post('/test/execute', { a: 1 }, { idempotencyKey: k });
    expect(res.status).toBe(201);
    expect(res.headers.get('x-idempotent-replay')).toBeNull();

    const old = key();
    await s.ctx.db.query(
      `WITH k AS (
         INSERT INTO idempotency_keys (merchant_id, method, path, key, request_hash, status, owner_token, locked_until, response_status, expires_at)
         VALUES ($1, 'POST', $2, $3, $4, 'completed', $5, now(), 201, now() - interval '1 second') RETURNING id, expires_at)
       INSERT INTO idempotency_responses (key_id, expires_at, body) SELECT id, expires_at, '{"stale":true}' FROM k`,
      [m.merchantId, path, old, requestHash('{"a":1}'), randomUUID()],
    );
    const fresh = await m.client.post('/test/execute', { a: 1 }, { idempotencyKey: old });
    expect(fresh.body).toEqual({ worked: true, execution_id: expect.any(Number) });
  });

  it('recording the answer fails, and rolls the operation back, when the claim was lost', async () => {
    const store = new IdempotencyStore(s.ctx.db, s.ctx.clock);
    const result = await store.claim({ merchantId: m.merchantId, method: 'POST', path: '/x', key: key() }, 'h');
    if (result.kind !== 'claimed') throw new Error('expected a claim');
    await s.ctx.db.query('UPDATE idempotency_keys SET owner_token = $2 WHERE id = $1', [result.claim.id, randomUUID()]);
    const before = await executions(s.ctx, 'lost-claim');
    await expect(
      s.ctx.db.transaction(async (tx) => {
        await tx.query(`INSERT INTO pipeline_test_executions (client_id, body) VALUES ('lost-claim', '{}')`);
        await result.claim.record(tx, 201, '{}');
      }),
    ).rejects.toBeInstanceOf(IdempotencyLostError);
    expect(await executions(s.ctx, 'lost-claim')).toBe(before);
  });
});
