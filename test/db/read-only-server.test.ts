/**
 * A write that reaches a server in read-only mode — a standby, or the old primary behind a pooler
 * connection opened before a failover — fails with SQLSTATE 25006. Seen in the HA lab's 20-failover
 * run (npm run ha -- --long): the sandbox's MED report and the simulator's notification deferral
 * were answered 500 while the failover was in progress. 25006 means "the primary is not here right
 * now": the answer is 503 with Retry-After (isDatabaseUnavailable), and, since a read-only server
 * wrote nothing, it proves the rollback (provesRollback) — a retry may write again.
 * Before this test both classified 25006 as an ordinary error (500, not retryable).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { isDatabaseUnavailable, provesRollback } from '../../src/db/db.js';
import { BACKENDS, openTestDatabase, type TestDatabase } from '../helpers/db.js';

describe.each(BACKENDS)('a write on a read-only server, on %s', (backend) => {
  let t: TestDatabase;
  beforeAll(async () => {
    t = await openTestDatabase(backend);
  });
  afterAll(async () => t?.close());

  it('is "the database is unavailable" (503) and proves the rollback', async () => {
    let error: unknown;
    try {
      await t.db.transaction(async (tx) => {
        await tx.query('SET TRANSACTION READ ONLY');
        await tx.query('CREATE TEMP TABLE IF NOT EXISTS read_only_probe (x int)');
      });
    } catch (err) {
      error = err;
    }
    expect((error as { code?: string }).code).toBe('25006');
    expect(isDatabaseUnavailable(error)).toBe(true);
    expect(provesRollback(error, false)).toBe(true);
    expect(provesRollback(error, true)).toBe(true);
  });
});
