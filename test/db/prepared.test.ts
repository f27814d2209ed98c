import { describe, expect, it } from 'vitest';
import { PLAN_EACH_RUN } from '../../src/db/db.js';
import { openPostgres, preparedName } from '../../src/db/postgres.js';

/**
 * The PostgreSQL adapter prepares parameterized statements, long or short (PostgreSQL then keeps a
 * generic plan per connection); a statement that starts with PLAN_EACH_RUN is never prepared, so it
 * is planned on each run with the table sizes of that moment (docs/decisions.md, "Query plans on
 * young tables"); neither is one without parameters. Read from pg_prepared_statements of the
 * pool's only connection.
 */
const url = process.env.TEST_DATABASE_URL;

describe.skipIf(!url)('prepared statements on PostgreSQL', () => {
  it('a parameterized statement, long or short, is prepared once per connection; one marked PLAN_EACH_RUN is not, nor one without parameters', async () => {
    const db = await openPostgres({ url: url!, max: 1 });
    try {
      const tag = `t${Date.now()}`;
      const filler = `/* ${tag} ${'x'.repeat(400)} */`;
      const long = `SELECT $1::int + 1 AS n ${filler} -- long`;
      const short = `SELECT $1::int + 3 AS n /* ${tag} */ -- short`;
      const eachRun = `${PLAN_EACH_RUN}SELECT $1::int + 2 AS n ${filler} -- each run`;
      const plain = `SELECT 4 AS n /* ${tag} */ -- no parameters`;
      for (let i = 0; i < 3; i++) {
        expect(await db.query(long, [i])).toEqual([{ n: i + 1 }]);
        expect(await db.query(short, [i])).toEqual([{ n: i + 3 }]);
        expect(await db.query(eachRun, [i])).toEqual([{ n: i + 2 }]);
        expect(await db.query(plain)).toEqual([{ n: 4 }]);
      }
      const rows = await db.query<{ statement: string }>(`SELECT statement FROM pg_prepared_statements WHERE position($1 in statement) > 0 ORDER BY statement`, [tag]);
      expect(rows.map((r) => r.statement.slice(r.statement.lastIndexOf('-- ') + 3))).toEqual(['long', 'short']);
    } finally {
      await db.close();
    }
  });

  it('names a text by its digest, the same every time, and runs texts past the first MAX_PREPARED_TEXTS unnamed', () => {
    const names = new Map<string, string>();
    const a = preparedName('SELECT $1', names, 2);
    expect(a).toMatch(/^px_[0-9a-f]{24}$/);
    expect(preparedName('SELECT $1', names, 2)).toBe(a);
    expect(preparedName('SELECT $2', names, 2)).toMatch(/^px_/);
    expect(preparedName('SELECT $3', names, 2)).toBeUndefined(); // the cap: texts built at run time cannot grow every connection's statements
    expect(preparedName('SELECT $1', names, 2)).toBe(a); // those named before stay named
  });
});
