import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { openPostgres } from '../../src/db/postgres.js';

/**
 * Found by the fault-injection suite (docs/chaos.md): when PostgreSQL ends a connection that a
 * transaction holds between two statements (a restart, `pg_terminate_backend`, an idle-in-transaction
 * timeout), node-postgres emits 'error' on the checked-out client, which had no listener: the whole
 * process died with "Unhandled 'error' event". The transaction must fail alone, the pool carry on.
 */
const url = process.env.TEST_DATABASE_URL;

describe.skipIf(!url)('PostgreSQL connection lost inside a transaction', () => {
  it('fails that transaction only; the process and the pool carry on', async () => {
    const db = await openPostgres({ url: url!, max: 2 });
    const killer = new pg.Client({ connectionString: url });
    await killer.connect();
    try {
      const outcome = db.transaction(async (tx) => {
        const [{ pid }] = (await tx.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')) as [{ pid: number }];
        await killer.query('SELECT pg_terminate_backend($1)', [pid]);
        // The termination reaches the client while it is checked out and idle (no query running).
        await new Promise((r) => setTimeout(r, 300));
        await tx.query('SELECT 1');
      });
      await expect(outcome).rejects.toThrow();
      expect(await db.query<{ one: number }>('SELECT 1 AS one')).toEqual([{ one: 1 }]);
    } finally {
      await killer.end();
      await db.close();
    }
  });
});
