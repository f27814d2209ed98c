/**
 * npm run bench:statement — how the statement's queries behave on an account with millions of
 * rows: fills a fresh PostgreSQL schema (BENCH_ROWS statement rows on one account, plus unpaid
 * charges that must be skipped and rows of other accounts), then prints EXPLAIN (ANALYZE, BUFFERS)
 * of the exact SQL GET /statement runs for each shape of query. Figures only.
 *
 *   BENCH_DATABASE_URL  postgres://postgres@127.0.0.1:5432/test (or TEST_DATABASE_URL)
 *   BENCH_ROWS          2000000
 */
import pg from 'pg';
import type { Sql } from '../src/db/db.js';
import { migrate } from '../src/db/migrate.js';
import { openPostgres } from '../src/db/postgres.js';
import { listStatement, listTransactions, type ListQuery } from '../src/transactions/repository.js';

const url = process.env.BENCH_DATABASE_URL ?? process.env.TEST_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
const ROWS = Number(process.env.BENCH_ROWS ?? 2_000_000);
const schema = `bench_stmt_${Date.now().toString(36)}`;

async function main() {
  const admin = new pg.Client({ connectionString: url });
  await admin.connect();
  await admin.query(`CREATE SCHEMA ${schema}`);
  const db = await openPostgres({ url, schema, max: 2 });
  try {
    await migrate(db);
    await db.query(`INSERT INTO merchants (name, document) VALUES ('Hot', '11444777000161'), ('Other', '11222333000181')`);
    await db.query(`INSERT INTO accounts (merchant_id) VALUES (1), (2)`);
    const started = Date.now();
    // Account 1: ROWS statement rows over ~2 years (5% rejected, 3% failed, 1% internal, 100 in
    // flight), ROWS/4 unpaid charges the statement must skip; account 2: ROWS/4 rows.
    const fill = async (account: number, count: number, kindSql: string, offset: number) => {
      const batch = 250_000;
      for (let from = 0; from < count; from += batch) {
        const to = Math.min(count, from + batch) - 1;
        await db.query(
          `INSERT INTO transactions (transaction_id, account_id, kind, type, direction, status, payment_status, stage,
                                     end_to_end_id, amount, created_at, completed_at, payer_name, payer_document, return_code)
           SELECT 'B' || ($3::bigint + g), $1, k.kind, k.type, k.direction, k.status, k.payment_status, k.stage,
                  'E' || lpad(($3::bigint + g)::text, 31, '0'), 100 + g % 1000,
                  now() - (g * interval '30 seconds'), now() - (g * interval '30 seconds'),
                  CASE WHEN k.kind = 'cash_out' THEN 'Hot' END, CASE WHEN k.kind = 'cash_out' THEN '11444777000161' END,
                  CASE WHEN k.kind = 'refund' THEN 'MD06' END
             FROM generate_series($2::bigint, $4::bigint) g
             CROSS JOIN LATERAL (${kindSql}) k`,
          [account, from, offset, to],
        );
      }
    };
    const mix = `SELECT * FROM (VALUES
        ('cash_out', 'pix', 'outbound', 1::smallint, 'settled', 3::smallint),
        ('pix_in', 'pix', 'inbound', 1::smallint, NULL, 3::smallint),
        ('cash_out', 'pix', 'outbound', 3::smallint, 'rejected', 3::smallint),
        ('refund', 'pix', 'outbound', 4::smallint, 'failed', 3::smallint),
        ('deposit', 'internal', 'inbound', 1::smallint, NULL, 3::smallint)
      ) AS v(kind, type, direction, status, payment_status, stage)
      WHERE v.kind || v.direction || v.status = CASE
        WHEN g % 100 < 5 THEN 'cash_outoutbound3' WHEN g % 100 < 8 THEN 'refundoutbound4'
        WHEN g % 100 < 9 THEN 'depositinbound1' WHEN g % 2 = 0 THEN 'cash_outoutbound1' ELSE 'pix_ininbound1' END`;
    await fill(1, ROWS, mix, 0);
    await fill(1, Math.floor(ROWS / 4), `SELECT 'charge'::text AS kind, 'pix'::text AS type, 'inbound'::text AS direction, 2::smallint AS status, NULL::text AS payment_status, 3::smallint AS stage`, 10_000_000);
    await fill(2, Math.floor(ROWS / 4), mix, 20_000_000);
    await db.query(
      `INSERT INTO transactions (transaction_id, account_id, kind, type, direction, status, payment_status, stage, amount, payer_name, payer_document)
       SELECT 'F' || g, 1, 'cash_out', 'pix', 'outbound', 2, 'processing', 2, 100, 'Hot', '11444777000161' FROM generate_series(1, 100) g`,
    );
    await db.exec('ANALYZE transactions');
    const [{ n }] = (await db.query<{ n: number }>('SELECT count(*)::bigint AS n FROM transactions')) as [{ n: number }];
    console.log(`filled ${n} rows in ${((Date.now() - started) / 1000).toFixed(0)} s (account 1: ${ROWS} listed + ${ROWS / 4} unpaid charges + 100 in flight)\n`);

    const explain = (label: string, run: (sql: Sql) => Promise<unknown>) => async () => {
      let plan: string[] = [];
      const spy: Sql = {
        async query<R>(text: string, params?: readonly unknown[]) {
          const rows = await db.query<{ 'QUERY PLAN': string }>(`EXPLAIN (ANALYZE, BUFFERS, COSTS OFF) ${text}`, params);
          plan = rows.map((r) => r['QUERY PLAN']);
          return [] as R[];
        },
        exec: (s) => db.exec(s),
      };
      await run(spy); // warm
      await run(spy);
      console.log(`== ${label}`);
      for (const line of plan) if (!/^\s*(Planning:|Buffers: shared hit=\d+$)/.test(line)) console.log(`   ${line}`);
      console.log();
    };
    const q = (extra: Partial<ListQuery>): ListQuery => ({ accountId: 1, limit: 20, offset: 0, ...extra });
    const day = new Date(Date.now() - 200 * 86_400_000);
    for (const step of [
      explain('statement page 1, no filter (with the merge of PIX in flight)', (sql) => listStatement(sql, q({}), true)),
      explain('statement page 1, status=settled', (sql) => listStatement(sql, q({ status: 'settled' }), false)),
      explain('statement page 1, status=rejected', (sql) => listStatement(sql, q({ status: 'rejected' }), false)),
      explain('statement page 1, type=internal (with the merge)', (sql) => listStatement(sql, q({ type: 'internal' }), true)),
      explain('statement page 1, one day 200 days ago (with the merge)', (sql) =>
        listStatement(sql, q({ from: day, before: new Date(day.getTime() + 86_400_000) }), true),
      ),
      explain('statement page 50 (per_page 100), no filter', (sql) => listStatement(sql, q({ limit: 100, offset: 4900 }), false)),
      explain('transactions page 1, status=processing', (sql) => listTransactions(sql, q({ status: 'processing' }))),
    ]) {
      await step();
    }
  } finally {
    await db.close();
    await admin.query(`DROP SCHEMA ${schema} CASCADE`);
    await admin.end();
  }
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
