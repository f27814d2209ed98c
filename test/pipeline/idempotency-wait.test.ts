import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Database } from '../../src/db/db.js';
import { IdempotencyStore } from '../../src/external/idempotency.js';
import { systemClock } from '../../src/lib/clock.js';
import { BACKENDS, openTestDatabase, type TestDatabase } from '../helpers/db.js';

/**
 * Issue 10, "bounded and observable": a duplicate request waiting for the first one backs off
 * instead of querying the database every 25 ms, wakes up when the first finishes in this process,
 * and still gives up (409 busy) after the 15-second bound.
 */
describe.each(BACKENDS)('waiting on a duplicate in-flight request, on %s', (backend) => {
  let t: TestDatabase;
  let merchantId: number;
  beforeAll(async () => {
    t = await openTestDatabase(backend);
    const [m] = await t.db.query<{ id: number }>(`INSERT INTO merchants (name, document) VALUES ('Espera', '11222333000181') RETURNING id`);
    merchantId = m!.id;
  });
  afterAll(async () => t?.close());

  /** The database as another process sees it, counting the statements on idempotency_keys. */
  const counting = (db: Database) => {
    const counter = { n: 0 };
    const wrapped: Database = {
      ...db,
      query: (text, params) => {
        if (text.includes('idempotency_keys')) counter.n++;
        return db.query(text, params);
      },
    };
    return { db: wrapped, counter };
  };

  it('a waiter in another process backs off: a 1.5 s wait costs a handful of queries, not one every 25 ms', async () => {
    const first = new IdempotencyStore(t.db, systemClock);
    const other = counting(t.db);
    const second = new IdempotencyStore(other.db, systemClock);
    const scope = { merchantId, method: 'POST', path: '/api/external/pix/cash-out', key: randomUUID() };
    const held = await first.claim(scope, 'h');
    if (held.kind !== 'claimed') throw new Error('expected a claim');
    const waiting = second.claim(scope, 'h');
    await new Promise((r) => setTimeout(r, 1500));
    await first.complete(held.claim, { statusCode: 201, body: '{"worked":true}' });
    expect(await waiting).toEqual({ kind: 'replay', answer: { statusCode: 201, body: '{"worked":true}' } });
    // Polling every 25 ms would be about 60 rounds of 2 statements; with backoff it is 8 or 9.
    expect(other.counter.n).toBeLessThan(25);
  });

  it('a waiter in the same process is woken when the first request finishes (no extra polling), and a release lets it claim', async () => {
    const counted = counting(t.db);
    const store = new IdempotencyStore(counted.db, systemClock);
    const scope = { merchantId, method: 'POST', path: '/api/external/pix/cash-out', key: randomUUID() };
    const held = await store.claim(scope, 'h');
    if (held.kind !== 'claimed') throw new Error('expected a claim');
    const waiting = store.claim(scope, 'h');
    await new Promise((r) => setTimeout(r, 1000));
    await store.release(held.claim);
    const next = await waiting;
    expect(next.kind).toBe('claimed');
    expect(counted.counter.n).toBeLessThan(20);
  });
});
