import { describe, expect, it } from 'vitest';
import { limitConcurrency } from '../../src/db/limit.js';
import { openPostgres } from '../../src/db/postgres.js';

const url = process.env.TEST_DATABASE_URL;

/** Issue 10: every connection has limits; background work cannot take the whole pool. */
describe.runIf(url)('PostgreSQL limits', () => {
  it('a long statement is cancelled by statement_timeout (57014)', async () => {
    const db = await openPostgres({ url: url!, max: 2, statementTimeoutMs: 200 });
    try {
      await expect(db.query('SELECT pg_sleep(5)')).rejects.toMatchObject({ code: '57014' });
    } finally {
      await db.close();
    }
  });

  it('a request is served while background work saturates its share of the pool', async () => {
    const db = await openPostgres({ url: url!, max: 4 });
    const holder = await openPostgres({ url: url!, max: 1 });
    const lockKey = Math.floor(Math.random() * 1e9);
    try {
      // The test holds an advisory lock; ten background transactions wait on it.
      await holder.query('SELECT pg_advisory_lock($1)', [lockKey]);
      const background = limitConcurrency(db, 2);
      const work = Array.from({ length: 10 }, () => background.transaction((tx) => tx.query('SELECT pg_advisory_xact_lock($1)', [lockKey])));
      let backgroundDone = false;
      const all = Promise.all(work).then(() => (backgroundDone = true));
      // A request on the same pool still gets a connection while all of that is stuck.
      expect(await db.query<{ one: number }>('SELECT 1 AS one')).toEqual([{ one: 1 }]);
      expect(backgroundDone).toBe(false);
      await holder.query('SELECT pg_advisory_unlock($1)', [lockKey]);
      await all;
    } finally {
      await holder.close();
      await db.close();
    }
  });
});
