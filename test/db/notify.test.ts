import pg from 'pg';
import { afterEach, describe, expect, it } from 'vitest';
import { notify, wakeLocal } from '../../src/db/db.js';
import { limitConcurrency } from '../../src/db/limit.js';
import { BACKENDS, openTestDatabase, type TestDatabase } from '../helpers/db.js';

const waitFor = async (check: () => boolean, ms = 5_000) => {
  const until = Date.now() + ms;
  while (!check()) {
    if (Date.now() > until) throw new Error('timed out waiting');
    await new Promise((r) => setTimeout(r, 10));
  }
};

/** Issue 12: wake-ups and cache invalidation travel by LISTEN/NOTIFY, per schema, after COMMIT. */
describe.each(BACKENDS)('LISTEN/NOTIFY (%s)', (backend) => {
  let t: TestDatabase;
  afterEach(async () => {
    await t?.close();
  });

  it('delivers a payload sent inside a transaction only after it commits, never after a rollback', async () => {
    t = await openTestDatabase(backend);
    const got: (string | null)[] = [];
    const stop = await t.db.listen('test_channel', (p) => got.push(p));
    await t.db.transaction(async (tx) => {
      await notify(tx, 'test_channel', 'one');
      await new Promise((r) => setTimeout(r, 50));
      expect(got).toEqual([]); // not before COMMIT
    });
    await waitFor(() => got.length === 1);
    expect(got).toEqual(['one']);
    await expect(
      t.db.transaction(async (tx) => {
        await notify(tx, 'test_channel', 'rolled back');
        throw new Error('abort');
      }),
    ).rejects.toThrow('abort');
    await notify(t.db, 'test_channel', 'two');
    await waitFor(() => got.length === 2);
    expect(got).toEqual(['one', 'two']);
    await stop();
    await notify(t.db, 'test_channel', 'after unlisten');
    await new Promise((r) => setTimeout(r, 100));
    expect(got).toEqual(['one', 'two']);
  });

  it('wakeLocal on the background view of the database wakes this process as on the database (outside a transaction: at once; inside: at commit)', async () => {
    t = await openTestDatabase(backend);
    const got: (string | null)[] = [];
    await t.db.listen('test_wake', (p) => got.push(p));
    const background = limitConcurrency(t.db.counted('background'), 2);
    // A statement outside a transaction has committed: the wake-up is dispatched at once, no NOTIFY.
    wakeLocal(background, 'test_wake');
    expect(got).toEqual(['']);
    await background.transaction(async (tx) => {
      wakeLocal(tx, 'test_wake');
      expect(got).toEqual(['']); // not before COMMIT
    });
    expect(got).toEqual(['', '']);
  });

  it.runIf(backend === 'postgres')('keeps schemas apart and tells handlers `null` after the listening connection is lost', async () => {
    t = await openTestDatabase(backend);
    const other = await openTestDatabase(backend);
    try {
      const got: (string | null)[] = [];
      await t.db.listen('test_channel', (p) => got.push(p));
      await notify(other.db, 'test_channel', 'other schema');
      await notify(t.db, 'test_channel', 'mine');
      await waitFor(() => got.length >= 1);
      await new Promise((r) => setTimeout(r, 100));
      expect(got).toEqual(['mine']);

      // Kill the listening connection: the driver reconnects, listens again and says `null`.
      const admin = new pg.Client({ connectionString: process.env.TEST_DATABASE_URL });
      await admin.connect();
      await admin.query(`SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'pixgate-listen' AND query LIKE 'LISTEN%' AND pid IN (SELECT pid FROM pg_stat_activity WHERE query LIKE $1)`, [
        `%${(await t.db.query<{ s: string }>('SELECT current_schema() AS s'))[0]!.s}__test_channel%`,
      ]);
      await admin.end();
      await waitFor(() => got.includes(null));
      await notify(t.db, 'test_channel', 'after reconnect');
      await waitFor(() => got.includes('after reconnect'));
    } finally {
      await other.close();
    }
  });
});
