/**
 * An Idempotency-Key claim under several processes whose clocks do not agree to the millisecond
 * (app nodes behind a balancer; or one loaded machine where a request computes its lease, then
 * waits in a batch while a later request's batch commits first). Before this test, a claim whose
 * lease ended even 1 ms later than the lease another request would take was read as "written
 * before the wall clock stepped back" and taken over: the first request then lost its key and
 * answered 500 (IdempotencyLostError) — seen as one 500 in "20 simultaneous POSTs with one key"
 * under load. A lease is now read as stepped back only when it ends more than one whole lease
 * later than a lease taken now.
 */
import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { CLAIM_LEASE_MS, IdempotencyStore } from '../../src/external/idempotency.js';
import type { Clock } from '../../src/lib/clock.js';
import { BACKENDS } from '../helpers/db.js';
import type { MerchantFixture } from '../helpers/client.js';
import type { TestServer } from '../helpers/server.js';
import { withPipelineServer } from './testRoutes.js';

const skewed = (ms: number): Clock => ({ now: () => new Date(Date.now() + ms) });

describe.each(BACKENDS)('idempotency claims across skewed clocks, on %s', (backend) => {
  let s: TestServer;
  let m: MerchantFixture;
  withPipelineServer({ backend }, (server, merchant) => {
    s = server;
    m = merchant;
  });

  it('a claim taken by a process whose clock runs 2 s ahead is not taken over by another process', async () => {
    const ahead = new IdempotencyStore(s.ctx.db, skewed(2_000));
    const behind = new IdempotencyStore(s.ctx.db, skewed(0));
    const scope = { merchantId: m.merchantId, method: 'POST', path: '/skew', key: `skew-${randomUUID()}` };
    const first = await ahead.claim(scope, 'h');
    if (first.kind !== 'claimed') throw new Error(`expected a claim, got ${first.kind}`);

    const second = behind.claim(scope, 'h');
    await new Promise((r) => setTimeout(r, 300));
    // The first request still owns its key: recording its answer succeeds…
    await s.ctx.db.transaction((tx) => first.claim.record(tx, 201, '{"worked":true}'));
    // …and the concurrent duplicate replays it instead of running the operation again.
    expect(await second).toEqual({ kind: 'replay', answer: { statusCode: 201, body: '{"worked":true}' } });
  });

  it('a lease ending more than one lease beyond now (written before a wall-clock step back) is still taken over', async () => {
    const store = new IdempotencyStore(s.ctx.db, skewed(0));
    const scope = { merchantId: m.merchantId, method: 'POST', path: '/skew', key: `skew-${randomUUID()}` };
    await s.ctx.db.query(
      `INSERT INTO idempotency_keys (merchant_id, method, path, key, request_hash, status, owner_token, locked_until, expires_at)
       VALUES ($1, $2, $3, $4, 'h', 'in_progress', $5, $6, now() + interval '1 day')`,
      [scope.merchantId, scope.method, scope.path, scope.key, randomUUID(), new Date(Date.now() + 2 * CLAIM_LEASE_MS + 60_000)],
    );
    expect((await store.claim(scope, 'h')).kind).toBe('claimed');
  });
});
