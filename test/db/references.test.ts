import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sqlState } from '../../src/db/db.js';
import { INSTITUTION_BOOK, post } from '../../src/ledger/ledger.js';
import { createMerchant } from '../../src/merchants/service.js';
import { BACKENDS, openTestDatabase, type TestDatabase } from '../helpers/db.js';
import { validCnpj } from '../helpers/fixtures.js';

/**
 * The references of ledger entries (to their ledger transaction and ledger account) and of outbox
 * events (to their merchant and account) are checked once per statement, on the rows it wrote
 * (migration 0670), instead of by foreign keys — whose check locked the referenced row (FOR KEY
 * SHARE) once per entry or event: about ten row locks, each a WAL record, per cash-out, most of
 * them on the same few hot rows (the central bank's book, the merchant's account). The referenced
 * rows are never deleted and their ids never change, which the database enforces, so a check
 * without a lock holds as long as the foreign key did.
 */
describe.each(BACKENDS)('references checked per statement on %s', (backend) => {
  let t: TestDatabase;
  let merchantId: number;
  let accountId: number;
  beforeAll(async () => {
    t = await openTestDatabase(backend);
    const { merchant, account } = await createMerchant(t.db, { name: 'Reference Test', document: validCnpj() });
    merchantId = merchant.id;
    accountId = account.id;
  });
  afterAll(async () => {
    await t?.close();
  });

  async function refused(statement: Promise<unknown>): Promise<unknown> {
    const err = await statement.then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(err).toBeDefined();
    return err;
  }

  const count = async (table: string) => Number((await t.db.query<{ n: string }>(`SELECT count(*) AS n FROM ${table}`))[0]!.n);

  it('an entry of a ledger account that does not exist is refused (23503), and its statement wrote nothing', async () => {
    const before = await count('ledger_transactions');
    const err = await refused(
      t.db.query(
        `WITH lt AS (INSERT INTO ledger_transactions (kind, reference) VALUES ('raw', 'missing-account') RETURNING id)
         INSERT INTO ledger_entries (ledger_transaction_id, ledger_account_id, amount)
         SELECT lt.id, v.account, v.amount FROM lt, (VALUES (-999999999::bigint, 5::bigint), ((SELECT id FROM ledger_accounts WHERE code = $1), -5)) AS v(account, amount)`,
        [`account:${accountId}:available`],
      ),
    );
    expect(sqlState(err)).toBe('23503');
    expect((err as Error).message).toMatch(/ledger account -999999999/);
    expect(await count('ledger_transactions')).toBe(before);
  });

  it('an entry of a ledger transaction that does not exist is refused (23503)', async () => {
    const err = await refused(
      t.db.query(
        `INSERT INTO ledger_entries (ledger_transaction_id, ledger_account_id, amount)
         SELECT -424242, id, CASE WHEN code = $1 THEN 7 ELSE -7 END FROM ledger_accounts WHERE code IN ($1, $2)`,
        [`account:${accountId}:available`, 'institution:funding'],
      ),
    );
    expect(sqlState(err)).toBe('23503');
    expect((err as Error).message).toMatch(/ledger transaction -424242/);
  });

  it('post() still writes a balanced transaction whose references hold', async () => {
    await t.db.transaction((tx) =>
      post(tx, {
        kind: 'reference_test',
        reference: 'ok',
        postings: [
          { book: INSTITUTION_BOOK.funding, amount: -300 },
          { book: { accountId, book: 'available' }, amount: 300 },
        ],
      }),
    );
    const [row] = await t.db.query<{ n: string }>(
      `SELECT count(*) AS n FROM ledger_entries e JOIN ledger_transactions lt ON lt.id = e.ledger_transaction_id
        WHERE lt.kind = 'reference_test'`,
    );
    expect(Number(row!.n)).toBe(2);
  });

  it('an outbox event of a merchant or an account that does not exist is refused (23503); one without an account is fine', async () => {
    const insert = (merchant: number, account: number | null) =>
      t.db.query(`INSERT INTO outbox_events (event, merchant_id, account_id, subject, payload) VALUES ('test.event', $1, $2, 's', '{}')`, [merchant, account]);
    const byMerchant = await refused(insert(-77, null));
    expect(sqlState(byMerchant)).toBe('23503');
    expect((byMerchant as Error).message).toMatch(/merchant -77/);
    const byAccount = await refused(insert(merchantId, -88));
    expect(sqlState(byAccount)).toBe('23503');
    expect((byAccount as Error).message).toMatch(/account -88/);
    await insert(merchantId, null);
    await insert(merchantId, accountId);
    await expect(t.db.query(`UPDATE outbox_events SET account_id = -88 WHERE event = 'test.event'`)).rejects.toThrow(/references of an outbox event/);
  });

  it('the rows referred to are never deleted and their ids never change', async () => {
    for (const table of ['ledger_accounts', 'ledger_transactions', 'merchants', 'accounts']) {
      const del = await refused(t.db.query(`DELETE FROM ${table} WHERE id = -1`));
      expect(sqlState(del)).toBe('23503');
      expect((del as Error).message).toMatch(new RegExp(`${table} rows are never deleted`));
      // Identity columns take no value but DEFAULT, which would give the row a new id.
      const upd = await refused(t.db.query(`UPDATE ${table} SET id = DEFAULT WHERE id = (SELECT max(id) FROM ${table})`));
      expect(sqlState(upd)).toBe('23503');
      expect((upd as Error).message).toMatch(new RegExp(`${table} ids never change`));
    }
    expect(await count('accounts')).toBeGreaterThan(0);
  });

  it.runIf(backend === 'postgres')('appending entries and events locks none of the rows they refer to', async () => {
    const other = new pg.Client({ connectionString: process.env.TEST_DATABASE_URL });
    await other.connect();
    try {
      const [schema] = (await t.db.query<{ s: string }>('SELECT current_schema() AS s')) as [{ s: string }];
      await other.query(`SET search_path = ${schema.s}`);
      await t.db.transaction(async (tx) => {
        await post(tx, {
          kind: 'reference_lock_test',
          reference: 'lock',
          postings: [
            { book: INSTITUTION_BOOK.funding, amount: -1 },
            { book: { accountId, book: 'available' }, amount: 1 },
          ],
        });
        await tx.query(`INSERT INTO outbox_events (event, merchant_id, account_id, subject, payload) VALUES ('test.event', $1, $2, 's', '{}')`, [merchantId, accountId]);
        // A foreign key's check would hold FOR KEY SHARE on each of these until COMMIT.
        await other.query("SET lock_timeout = '1s'");
        // (The account's own book is locked, by the running balance's update: not by a reference.)
        const locked = async (text: string, params: unknown[]) => (await other.query(text, params)).rowCount;
        expect(await locked(`SELECT 1 FROM ledger_accounts WHERE code = $1 FOR UPDATE NOWAIT`, ['institution:funding'])).toBe(1);
        expect(await locked('SELECT 1 FROM merchants WHERE id = $1 FOR UPDATE NOWAIT', [merchantId])).toBe(1);
        expect(await locked('SELECT 1 FROM accounts WHERE id = $1 FOR UPDATE NOWAIT', [accountId])).toBe(1);
      });
    } finally {
      await other.end();
    }
  });
});
