import { afterAll, beforeAll, beforeEach, describe, expect, it, vi } from 'vitest';
import { CredentialCache } from '../../src/auth/credentialCache.js';
import type { Database, Sql } from '../../src/db/db.js';
import { merchantWithKey } from '../helpers/client.js';
import { BACKENDS, openTestDatabase, type TestDatabase } from '../helpers/db.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

const TTL_MS = 1_000;
const SOURCE = 'auth_cache_test';

/**
 * How the credential cache reads (src/auth/credentialCache.ts), counted in statements on a real
 * database, with the cache's own clock in the test's hands. Under load every request of a key
 * whose entry ran out used to read it on its own, and every key cached at the same moment ran out
 * at the same moment: the bench saw every 5 s (AUTH_CACHE_TTL_MS) a burst of lookups queue on the
 * pool ahead of the money statements and a stall of ~150 ms for all requests in flight.
 */
describe.each(BACKENDS)('credential cache reads on %s', (backend) => {
  let server: TestServer;
  let database: TestDatabase;
  let db: Database;
  let ids: string[];
  let now = 0;
  let failing = false;
  let cache: CredentialCache;
  /** The database as the cache sees it: real statements, refused while `failing`. */
  let sql: Sql;

  const count = () => db.statements()[SOURCE] ?? 0;

  beforeAll(async () => {
    database = await openTestDatabase(backend);
    server = await startTestServer({ database, workers: false });
    ids = [];
    for (let i = 0; i < 5; i++) ids.push((await merchantWithKey(server)).client.clientId);
    db = server.ctx.db;
    const counted = db.counted(SOURCE);
    sql = {
      query: (text, params) => (failing ? Promise.reject(new Error('connection refused (test)')) : counted.query(text, params)),
    } as Sql;
  });
  afterAll(async () => {
    await cache?.close();
    await server?.close();
    await database?.close();
  });
  beforeEach(async () => {
    await cache?.close();
    now = 0;
    failing = false;
    cache = new CredentialCache(TTL_MS, { now: () => now });
    await cache.listen(db);
  });

  it('concurrent lookups of a key that is not cached share one statement', async () => {
    const before = count();
    const rows = await Promise.all(Array.from({ length: 20 }, () => cache.apiKey(sql, ids[0]!)));
    expect(count() - before).toBe(1);
    expect(new Set(rows.map((r) => r?.client_id))).toEqual(new Set([ids[0]]));
    expect(new Set(rows).size).toBe(1);
  });

  it('lookups of different keys that miss together share one statement, each answered with its own row', async () => {
    const before = count();
    const rows = await Promise.all(ids.map((id) => cache.apiKey(sql, id)));
    expect(count() - before).toBe(1);
    expect(rows.map((r) => r?.client_id)).toEqual(ids);
  });

  it('an unknown client id is answered undefined in a batch with known ones, and not kept', async () => {
    const rows = await Promise.all([cache.apiKey(sql, ids[0]!), cache.apiKey(sql, 'cli_unknown0000'), cache.apiKey(sql, ids[1]!)]);
    expect(rows.map((r) => r?.client_id)).toEqual([ids[0], undefined, ids[1]]);
    const before = count();
    expect(await cache.apiKey(sql, 'cli_unknown0000')).toBeUndefined();
    expect(count() - before).toBe(1);
  });

  it('a fresh entry costs no statement', async () => {
    await cache.apiKey(sql, ids[0]!);
    now = TTL_MS / 2 - 1;
    const before = count();
    await cache.apiKey(sql, ids[0]!);
    expect(count() - before).toBe(0);
  });

  it('past half its TTL an entry is answered at once and read again in the background, once; the renewed entry then lasts a full TTL', async () => {
    const first = await cache.apiKey(sql, ids[0]!);
    now = TTL_MS * 0.6;
    const before = count();
    // Answered from the entry in hand, without waiting for the statement the lookups started.
    const answers = await Promise.all(Array.from({ length: 10 }, () => cache.apiKey(sql, ids[0]!)));
    for (const a of answers) expect(a).toBe(first);
    await vi.waitFor(() => expect(count() - before).toBe(1));
    await vi.waitFor(async () => expect(await cache.apiKey(sql, ids[0]!)).not.toBe(first));
    // Past the first entry's expiry, inside the renewed one's half-life: no statement.
    now = TTL_MS * 1.05;
    const after = count();
    expect((await cache.apiKey(sql, ids[0]!))?.client_id).toBe(ids[0]);
    expect(count() - after).toBe(0);
    expect(count() - before).toBe(1);
  });

  it('an expired entry is read before it is answered', async () => {
    await cache.apiKey(sql, ids[0]!);
    now = TTL_MS + 1;
    failing = true;
    await expect(cache.apiKey(sql, ids[0]!)).rejects.toThrow('connection refused (test)');
    failing = false;
    const before = count();
    expect((await cache.apiKey(sql, ids[0]!))?.client_id).toBe(ids[0]);
    expect(count() - before).toBe(1);
  });

  it('a background read that fails leaves the entry to serve until it expires, then the next lookup reads', async () => {
    const first = await cache.apiKey(sql, ids[0]!);
    now = TTL_MS * 0.6;
    failing = true;
    expect(await cache.apiKey(sql, ids[0]!)).toBe(first);
    await new Promise((resolve) => setTimeout(resolve, 50));
    now = TTL_MS * 0.9;
    expect(await cache.apiKey(sql, ids[0]!)).toBe(first);
    now = TTL_MS + 1;
    await expect(cache.apiKey(sql, ids[0]!)).rejects.toThrow('connection refused (test)');
    failing = false;
    expect((await cache.apiKey(sql, ids[0]!))?.client_id).toBe(ids[0]);
  });

  it('a lookup after an invalidation does not join a read that started before it, and its answer is kept', async () => {
    const early = cache.apiKey(sql, ids[0]!);
    cache.invalidate(`key:${ids[0]}`);
    const late = cache.apiKey(sql, ids[0]!);
    await Promise.all([early, late]);
    // Joined to the early read, the late lookup's answer would belong to the older epoch and not
    // be kept: the next lookup would read again.
    const before = count();
    await cache.apiKey(sql, ids[0]!);
    expect(count() - before).toBe(0);
  });
});
