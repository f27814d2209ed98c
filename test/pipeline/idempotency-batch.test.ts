import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Database } from '../../src/db/db.js';
import { IdempotencyStore, type ClaimResult } from '../../src/external/idempotency.js';
import { systemClock } from '../../src/lib/clock.js';
import { BACKENDS, openTestDatabase, type TestDatabase } from '../helpers/db.js';

/**
 * Issue 12, group commit for Idempotency-Keys: the claims of requests that arrive together are
 * inserted by one statement and their answers stored by one statement, each request still getting
 * its own result (claimed, wait-then-replay, mismatch, or its own error).
 */
describe.each(BACKENDS)('Idempotency-Key claims in batches, on %s', (backend) => {
  let t: TestDatabase;
  let merchantId: number;
  beforeAll(async () => {
    t = await openTestDatabase(backend);
    const [m] = await t.db.query<{ id: number }>(`INSERT INTO merchants (name, document) VALUES ('Lote', '11222333000181') RETURNING id`);
    merchantId = m!.id;
  });
  afterAll(async () => t?.close());

  /** The database with the statements on idempotency_keys recorded. */
  const recording = (db: Database) => {
    const statements: string[] = [];
    const wrapped: Database = {
      ...db,
      query: (text, params) => {
        if (text.includes('idempotency_keys')) statements.push(text.trim().split(/\s+/).slice(0, 2).join(' '));
        return db.query(text, params);
      },
    };
    return { db: wrapped, statements };
  };
  const scope = (key: string) => ({ merchantId, method: 'POST', path: '/api/external/pix/cash-out', key });

  it('20 new keys claimed together: one INSERT, 20 claims; their answers stored together: one statement (keys completed, answers written); each replays its own', async () => {
    const r = recording(t.db);
    const store = new IdempotencyStore(r.db, systemClock);
    const keys = Array.from({ length: 20 }, () => randomUUID());
    const claims = await Promise.all(keys.map((k) => store.claim(scope(k), `h-${k}`)));
    expect(claims.map((c) => c.kind)).toEqual(keys.map(() => 'claimed'));
    const ids = claims.map((c) => (c.kind === 'claimed' ? c.claim.id : 0));
    expect(new Set(ids).size).toBe(20);
    expect(r.statements).toEqual(['INSERT INTO']);
    await Promise.all(claims.map((c, i) => c.kind === 'claimed' && store.complete(c.claim, { statusCode: 200, body: `{"n":${i}}` })));
    expect(r.statements).toEqual(['INSERT INTO', 'WITH done']);
    const replays = await Promise.all(keys.map((k) => store.claim(scope(k), `h-${k}`)));
    expect(replays).toEqual(keys.map((_, i) => ({ kind: 'replay', answer: { statusCode: 200, body: `{"n":${i}}` } })));
  });

  it('the same key twice in one batch: one claims, the other waits and replays its answer; another body is a mismatch', async () => {
    const store = new IdempotencyStore(t.db, systemClock);
    const key = randomUUID();
    const results: Promise<ClaimResult>[] = [store.claim(scope(key), 'same'), store.claim(scope(key), 'same'), store.claim(scope(key), 'other')];
    const first = await Promise.race(results.map((p, i) => p.then((c) => ({ c, i }))));
    expect(first.c.kind).toBe('claimed');
    expect(first.i).toBe(0);
    if (first.c.kind !== 'claimed') return;
    await store.complete(first.c.claim, { statusCode: 200, body: '{"once":true}' });
    expect(await Promise.all(results)).toEqual([
      first.c,
      { kind: 'replay', answer: { statusCode: 200, body: '{"once":true}' } },
      { kind: 'mismatch' },
    ]);
  });

  it('the same key ten times in one batch goes to the item that came first; the others, with another body, are mismatches', async () => {
    const store = new IdempotencyStore(t.db, systemClock);
    const key = randomUUID();
    const results = await Promise.all(Array.from({ length: 10 }, (_, i) => store.claim(scope(key), i === 0 ? 'first' : 'later')));
    expect(results.map((r) => r.kind)).toEqual(['claimed', ...Array.from({ length: 9 }, () => 'mismatch')]);
  });

  it('an item the database refuses fails alone: the others of its batch are claimed', async () => {
    const store = new IdempotencyStore(t.db, systemClock);
    const good = [randomUUID(), randomUUID()];
    const results = await Promise.allSettled([store.claim(scope(good[0]!), 'h'), store.claim(scope('x'.repeat(300)), 'h'), store.claim(scope(good[1]!), 'h')]);
    expect(results.map((x) => x.status)).toEqual(['fulfilled', 'rejected', 'fulfilled']);
    expect(results.map((x) => (x.status === 'fulfilled' ? x.value.kind : 'error'))).toEqual(['claimed', 'error', 'claimed']);
    const [row] = await t.db.query<{ n: number }>(`SELECT count(*)::int AS n FROM idempotency_keys WHERE key = ANY($1::text[])`, [good]);
    expect(row!.n).toBe(2);
  });

  it('a batch inserts its rows in key order whatever the arrival order (two batches with common keys wait in one order: no deadlock)', async () => {
    const store = new IdempotencyStore(t.db, systemClock);
    const keys = Array.from({ length: 20 }, (_, i) => `order-${randomUUID().slice(0, 8)}-${String(i).padStart(2, '0')}`).sort();
    const arriving = [...keys].reverse();
    const claims = await Promise.all(arriving.map((k) => store.claim(scope(k), 'h')));
    const idOf = new Map(claims.map((c, i) => [arriving[i]!, c.kind === 'claimed' ? c.claim.id : NaN]));
    const ids = keys.map((k) => idOf.get(k)!);
    expect(ids).toEqual([...ids].sort((x, y) => x - y));
  });

  it('two processes claiming the same 60 keys in opposite orders: each key claimed once, the other replays it', async () => {
    const a = new IdempotencyStore(t.db, systemClock);
    const b = new IdempotencyStore(t.db, systemClock);
    const keys = Array.from({ length: 60 }, () => randomUUID());
    const claimAndAnswer = async (store: IdempotencyStore, name: string, key: string) => {
      const c = await store.claim(scope(key), 'h');
      if (c.kind === 'claimed') {
        await store.complete(c.claim, { statusCode: 200, body: `{"by":"${name}"}` });
        return name;
      }
      if (c.kind === 'replay') return `replay:${c.answer.body}`;
      return c.kind;
    };
    const [fromA, fromB] = await Promise.all([
      Promise.all(keys.map((k) => claimAndAnswer(a, 'a', k))),
      Promise.all([...keys].reverse().map((k) => claimAndAnswer(b, 'b', k))),
    ]);
    fromB.reverse();
    for (let i = 0; i < keys.length; i++) {
      const pair = [fromA[i], fromB[i]].sort();
      expect([['a', 'replay:{"by":"a"}'], ['b', 'replay:{"by":"b"}']]).toContainEqual(pair);
    }
  });
});
