import { describe, expect, it } from 'vitest';
import { PLAN_EACH_RUN } from '../../src/db/db.js';
import { openPostgres } from '../../src/db/postgres.js';

/**
 * The PostgreSQL adapter prepares long parameterized statements (PostgreSQL then keeps a generic
 * plan per connection); a statement that starts with PLAN_EACH_RUN is never prepared, so it is
 * planned on each run with the table sizes of that moment (docs/decisions.md, "Query plans on
 * young tables"). Read from pg_prepared_statements of the pool's only connection.
 */
const url = process.env.TEST_DATABASE_URL;

describe.skipIf(!url)('prepared statements on PostgreSQL', () => {
  it('a long parameterized statement is prepared once per connection; one marked PLAN_EACH_RUN is not', async () => {
    const db = await openPostgres({ url: url!, max: 1 });
    try {
      const filler = `/* ${'x'.repeat(400)} */`;
      const prepared = `SELECT $1::int + 1 AS n ${filler} -- prepared`;
      const eachRun = `${PLAN_EACH_RUN}SELECT $1::int + 2 AS n ${filler} -- each run`;
      for (let i = 0; i < 3; i++) {
        expect(await db.query(prepared, [i])).toEqual([{ n: i + 1 }]);
        expect(await db.query(eachRun, [i])).toEqual([{ n: i + 2 }]);
      }
      const rows = await db.query<{ statement: string }>(`SELECT statement FROM pg_prepared_statements WHERE position($1 in statement) > 0`, [filler.slice(0, 40)]);
      const kinds = rows.map((r) => (r.statement.endsWith('-- prepared') ? 'prepared' : r.statement.endsWith('-- each run') ? 'each run' : 'other'));
      expect(kinds).toEqual(['prepared']);
    } finally {
      await db.close();
    }
  });
});
