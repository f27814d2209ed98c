import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Database, Sql } from '../src/db/db.js';
import {
  INSTITUTION_BOOK,
  InsufficientFundsError,
  lockAccount,
  post,
  readBalances,
} from '../src/ledger/ledger.js';
import { createMerchant } from '../src/merchants/service.js';
import { BACKENDS, openTestDatabase, type TestDatabase } from './helpers/db.js';
import { validCnpj } from './helpers/fixtures.js';

/** A debit as money-moving code does it: lock the account, check, post. */
async function debit(db: Database, accountId: number, amount: number, ref: string): Promise<boolean> {
  return db.transaction(async (tx) => {
    const balances = await lockAccount(tx, accountId);
    if (balances.available < amount) return false;
    await post(tx, {
      kind: 'test_debit',
      reference: ref,
      postings: [
        { book: { accountId, book: 'available' }, amount: -amount },
        { book: INSTITUTION_BOOK.centralBank, amount },
      ],
    });
    return true;
  });
}

async function credit(sql: Sql, accountId: number, amount: number, ref: string) {
  await post(sql, {
    kind: 'test_credit',
    reference: ref,
    postings: [
      { book: INSTITUTION_BOOK.funding, amount: -amount },
      { book: { accountId, book: 'available' }, amount },
    ],
  });
}

async function newAccount(db: Database): Promise<number> {
  const { account } = await createMerchant(db, { name: 'Ledger Test', document: validCnpj() });
  return account.id;
}

async function ledgerTotals(db: Database) {
  const [sum] = await db.query<{ total: number }>('SELECT COALESCE(sum(balance), 0)::bigint AS total FROM ledger_balances');
  const mismatched = await db.query(
    `SELECT la.id FROM ledger_accounts la
      WHERE la.tracks_balance
        AND la.balance <> COALESCE((SELECT sum(amount) FROM ledger_entries e WHERE e.ledger_account_id = la.id), 0)`,
  );
  const unbalanced = await db.query(
    'SELECT ledger_transaction_id FROM ledger_entries GROUP BY ledger_transaction_id HAVING sum(amount) <> 0',
  );
  return { total: sum!.total, mismatched: mismatched.length, unbalanced: unbalanced.length };
}

describe.each(BACKENDS)('ledger on %s', (backend) => {
  let t: TestDatabase;
  beforeAll(async () => {
    t = await openTestDatabase(backend);
  });
  afterAll(async () => {
    await t?.close();
  });

  it('posts balanced transactions and keeps running balances equal to the entries', async () => {
    const a = await newAccount(t.db);
    await t.db.transaction((tx) => credit(tx, a, 5_000, 'c1'));
    expect(await debit(t.db, a, 1_200, 'd1')).toBe(true);
    const b = await readBalances(t.db, a);
    expect(b).toEqual({ available: 3_800, blocked: 0, pending: 0, ledgerTotal: 3_800, safe: 3_800 });
    expect(await ledgerTotals(t.db)).toEqual({ total: 0, mismatched: 0, unbalanced: 0 });
  });

  it('refuses an unbalanced transaction in application code', async () => {
    const a = await newAccount(t.db);
    await expect(
      t.db.transaction((tx) =>
        post(tx, { kind: 'bad', reference: 'x', postings: [{ book: { accountId: a, book: 'available' }, amount: 10 }, { book: INSTITUTION_BOOK.funding, amount: -9 }] }),
      ),
    ).rejects.toThrow(/unbalanced/);
  });

  it('the database itself refuses an unbalanced transaction (the statement that writes it fails)', async () => {
    const a = await newAccount(t.db);
    const attempt = t.db.transaction(async (tx) => {
      const [lt] = await tx.query<{ id: number }>("INSERT INTO ledger_transactions (kind, reference) VALUES ('raw', 'raw') RETURNING id");
      await tx.query(
        `INSERT INTO ledger_entries (ledger_transaction_id, ledger_account_id, amount)
         SELECT $1, id, 500 FROM ledger_accounts WHERE code = $2`,
        [lt!.id, `account:${a}:available`],
      );
    });
    await expect(attempt).rejects.toThrow(/unbalanced/);
    expect((await readBalances(t.db, a)).available).toBe(0);
  });

  it('the database refuses a negative available balance (CHECK) and reports insufficient funds', async () => {
    const a = await newAccount(t.db);
    await t.db.transaction((tx) => credit(tx, a, 100, 'c'));
    const overdraw = t.db.transaction((tx) =>
      post(tx, {
        kind: 'overdraw',
        reference: 'o',
        postings: [
          { book: { accountId: a, book: 'available' }, amount: -101 },
          { book: INSTITUTION_BOOK.centralBank, amount: 101 },
        ],
      }),
    );
    await expect(overdraw).rejects.toBeInstanceOf(InsufficientFundsError);
    expect((await readBalances(t.db, a)).available).toBe(100);
  });

  it('ledger entries are append-only', async () => {
    await expect(t.db.query('UPDATE ledger_entries SET amount = amount + 1')).rejects.toThrow(/append-only/);
    await expect(t.db.query('DELETE FROM ledger_entries')).rejects.toThrow(/append-only/);
  });

  it('50 concurrent debits of 10 against 100: exactly 10 succeed and the balance ends at 0', async () => {
    const a = await newAccount(t.db);
    await t.db.transaction((tx) => credit(tx, a, 100, 'fund'));
    const results = await Promise.all(Array.from({ length: 50 }, (_, i) => debit(t.db, a, 10, `d${i}`)));
    expect(results.filter(Boolean)).toHaveLength(10);
    const b = await readBalances(t.db, a);
    expect(b.available).toBe(0);
    const [entries] = await t.db.query<{ n: number }>(
      `SELECT count(*)::bigint AS n FROM ledger_entries e JOIN ledger_accounts la ON la.id = e.ledger_account_id
        WHERE la.code = $1 AND e.amount < 0`,
      [`account:${a}:available`],
    );
    expect(entries!.n).toBe(10);
  });

  it('randomized deposits, debits, blocks and reversals keep the ledger at zero and balances equal to entries', async () => {
    const accounts = [await newAccount(t.db), await newAccount(t.db), await newAccount(t.db)];
    const op = fc.oneof(
      fc.record({ kind: fc.constant('deposit' as const), acct: fc.nat(2), amount: fc.integer({ min: 1, max: 1_000_000 }) }),
      fc.record({ kind: fc.constant('debit' as const), acct: fc.nat(2), amount: fc.integer({ min: 1, max: 1_000_000 }) }),
      fc.record({ kind: fc.constant('block' as const), acct: fc.nat(2), amount: fc.integer({ min: 1, max: 500_000 }) }),
      fc.record({ kind: fc.constant('reverse' as const), acct: fc.nat(2), amount: fc.constant(0) }),
    );
    let ref = 0;
    await fc.assert(
      fc.asyncProperty(fc.array(op, { minLength: 1, maxLength: 25 }), async (ops) => {
        const expected = new Map<number, number>();
        for (const id of accounts) expected.set(id, (await readBalances(t.db, id)).ledgerTotal);
        for (const o of ops) {
          const id = accounts[o.acct]!;
          ref++;
          if (o.kind === 'deposit') {
            await t.db.transaction((tx) => credit(tx, id, o.amount, `r${ref}`));
            expected.set(id, expected.get(id)! + o.amount);
          } else if (o.kind === 'debit') {
            if (await debit(t.db, id, o.amount, `r${ref}`)) expected.set(id, expected.get(id)! - o.amount);
          } else if (o.kind === 'block') {
            // Moves money between the merchant's own books: the ledger total does not change.
            await t.db.transaction(async (tx) => {
              const b = await lockAccount(tx, id);
              const amount = Math.min(o.amount, b.available);
              if (amount === 0) return;
              await post(tx, {
                kind: 'block',
                reference: `r${ref}`,
                postings: [
                  { book: { accountId: id, book: 'available' }, amount: -amount },
                  { book: { accountId: id, book: 'blocked' }, amount },
                ],
              });
            });
          } else {
            // Reversal of the account's latest debit, as a new transaction with opposite entries.
            await t.db.transaction(async (tx) => {
              const [last] = await tx.query<{ ledger_transaction_id: number; amount: number }>(
                `SELECT e.ledger_transaction_id, e.amount FROM ledger_entries e
                   JOIN ledger_transactions lt ON lt.id = e.ledger_transaction_id
                   JOIN ledger_accounts la ON la.id = e.ledger_account_id
                  WHERE la.code = $1 AND lt.kind = 'test_debit'
                    AND NOT EXISTS (SELECT 1 FROM ledger_transactions r WHERE r.kind = 'reversal' AND r.reference = 'rev:' || lt.id)
                  ORDER BY e.id DESC LIMIT 1`,
                [`account:${id}:available`],
              );
              if (!last) return;
              const entries = await tx.query<{ code: string; amount: number }>(
                `SELECT la.code, e.amount FROM ledger_entries e JOIN ledger_accounts la ON la.id = e.ledger_account_id
                  WHERE e.ledger_transaction_id = $1`,
                [last.ledger_transaction_id],
              );
              await post(tx, {
                kind: 'reversal',
                reference: `rev:${last.ledger_transaction_id}`,
                postings: entries.map((e) => ({
                  book: e.code.startsWith('account:')
                    ? { accountId: Number(e.code.split(':')[1]), book: e.code.split(':')[2] as 'available' }
                    : (e.code as typeof INSTITUTION_BOOK.centralBank),
                  amount: -e.amount,
                })),
              });
              expected.set(id, expected.get(id)! - last.amount);
            });
          }
        }
        for (const id of accounts) {
          const b = await readBalances(t.db, id);
          expect(b.ledgerTotal).toBe(expected.get(id));
          expect(b.available).toBeGreaterThanOrEqual(0);
        }
        expect(await ledgerTotals(t.db)).toEqual({ total: 0, mismatched: 0, unbalanced: 0 });
      }),
      { numRuns: 25, ...(process.env.FC_SEED ? { seed: Number(process.env.FC_SEED) } : {}) },
    );
  });
});
