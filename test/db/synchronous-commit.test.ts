import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openPostgres } from '../../src/db/postgres.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

/**
 * A view made with `synchronousCommit: false` runs on connections of its own with
 * synchronous_commit off; every other view keeps the server's setting (on). The running server
 * gives it to the simulated rail only (docs/decisions.md, "The simulated rail's commits").
 */
const url = process.env.TEST_DATABASE_URL;
const setting = async (db: { query: (text: string) => Promise<unknown[]> }) => ((await db.query('SHOW synchronous_commit')) as { synchronous_commit: string }[])[0]!.synchronous_commit;

describe.skipIf(!url)('synchronous_commit per view on PostgreSQL', () => {
  it('off on a relaxed view, in its transactions too, and on on the others; closing the database closes both pools', async () => {
    const db = await openPostgres({ url: url!, max: 2 });
    try {
      const relaxed = db.counted('relaxed', { synchronousCommit: false });
      expect(await setting(db)).toBe('on');
      expect(await setting(relaxed)).toBe('off');
      expect(await relaxed.transaction((tx) => setting(tx))).toBe('off');
      expect(await setting(db.counted('background'))).toBe('on');
      // One view per source: asked again (with or without the option), the same view.
      expect(db.counted('relaxed')).toBe(relaxed);
      // Several connections at once: each new one is set before its first statement.
      expect(await Promise.all(Array.from({ length: 6 }, () => setting(relaxed)))).toEqual(Array(6).fill('off'));
      expect(db.statements()).toMatchObject({ relaxed: 10 }) // 1 + BEGIN, SHOW, COMMIT + 6;
    } finally {
      await db.close();
    }
  });

  describe('the running server', () => {
    let s: TestServer;
    beforeAll(async () => {
      s = await startTestServer({ backend: 'postgres', workers: false });
    });
    afterAll(async () => s?.close());

    it("commits the simulated rail's writes without waiting for the disk, and pixgate's own with", async () => {
      expect(await setting(s.ctx.db.counted('rail'))).toBe('off');
      expect(await setting(s.ctx.db)).toBe('on');
      expect(await setting(s.ctx.db.counted('background'))).toBe('on');
    });
  });
});
