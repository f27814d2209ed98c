import type { Sql } from '../db/db.js';
import { CHECK_VIOLATION, constraintName, sqlState } from '../db/db.js';
import { AmountTooLargeError, MAX_BALANCE_BASE_UNITS, safeSum } from '../lib/money.js';
import * as shortBlocks from './shortBlocks.js';

/**
 * The double-entry ledger. Every money movement is one call to `post` inside the caller's database
 * transaction: a ledger transaction whose entries (signed base units) sum to zero. The database
 * enforces it as well (deferred constraint trigger), keeps each merchant book's running balance
 * (trigger) and refuses a negative merchant book (CHECK).
 *
 * Sign convention: a positive entry raises the book's balance. Merchant books are what the
 * institution owes the merchant; institution books hold the other side, so the sum of all balances
 * is always zero.
 */

export type MerchantBook = 'available' | 'blocked' | 'pending';

export const INSTITUTION_BOOK = {
  centralBank: 'institution:central_bank',
  fees: 'institution:fees',
  funding: 'institution:funding',
  /** Paid boletos awaiting settlement (migration 0300). */
  boletoClearing: 'institution:boleto_clearing',
} as const;
export type InstitutionBook = (typeof INSTITUTION_BOOK)[keyof typeof INSTITUTION_BOOK];

/** A book: one of a merchant account's three, or an institution book by code. */
export type BookRef = { accountId: number; book: MerchantBook } | InstitutionBook;

export interface Posting {
  book: BookRef;
  /** Signed base units; never zero. */
  amount: number;
}

export function bookCode(ref: BookRef): string {
  return typeof ref === 'string' ? ref : `account:${ref.accountId}:${ref.book}`;
}

/** CHECKs of migration 0510 that bound amounts and balances; a violation is a 422 amount_too_large. */
export const BOUND_CONSTRAINTS: ReadonlySet<string> = new Set([
  'ledger_accounts_balance_max',
  'ledger_entries_amount_max',
  'transactions_amount_max',
  'transactions_fee_amount_max',
  'med_infractions_amount_max',
]);

/** Raised when a posting would take a merchant book below zero (the database CHECK fired). */
export class InsufficientFundsError extends Error {
  override name = 'InsufficientFundsError';
}

/** Creates the three books of a new merchant account. */
export async function openBooks(tx: Sql, accountId: number): Promise<void> {
  await tx.query(
    `INSERT INTO ledger_accounts (code, account_id, book, tracks_balance)
     SELECT 'account:' || $1::bigint || ':' || b, $1::bigint, b, true
       FROM unnest(ARRAY['available', 'blocked', 'pending']) AS b`,
    [accountId],
  );
}

/**
 * Balance figures of one merchant account (base units).
 *   available     the available book: what the merchant can move now
 *   blocked       precautionary MED blocks
 *   pending       reserved for outbound payments in flight
 *   ledger_total  available + blocked + pending: everything the institution holds for the merchant
 *   safe          min(available, ledger_total - blocked - pending): the spec's "safe balance", the
 *                 minimum of two independently summed figures; debits (cash-out, refund) must fit in it
 */
export interface Balances {
  available: number;
  blocked: number;
  pending: number;
  ledgerTotal: number;
  safe: number;
}

/** Balance figures from the rows of an account's books. */
export function toBalances(rows: readonly { book: string; balance: number }[]): Balances {
  const get = (book: MerchantBook) => rows.find((r) => r.book === book)?.balance ?? 0;
  const available = get('available');
  const blocked = get('blocked');
  const pending = get('pending');
  const ledgerTotal = safeSum([available, blocked, pending]);
  return { available, blocked, pending, ledgerTotal, safe: Math.min(available, ledgerTotal - blocked - pending) };
}

/** Balances as of now, without locking. */
export async function readBalances(sql: Sql, accountId: number): Promise<Balances> {
  const rows = await sql.query<{ book: string; balance: number }>(
    'SELECT book, balance FROM ledger_accounts WHERE account_id = $1',
    [accountId],
  );
  return toBalances(rows);
}

/** Balances of several accounts as of now, in one statement, without locking. */
export async function readBalancesOf(sql: Sql, accountIds: readonly number[]): Promise<Map<number, Balances>> {
  const rows = await sql.query<{ account_id: number; book: string; balance: number }>(
    'SELECT account_id, book, balance FROM ledger_accounts WHERE account_id = ANY($1::bigint[])',
    [accountIds],
  );
  const byAccount = new Map<number, { book: string; balance: number }[]>();
  for (const row of rows) {
    const list = byAccount.get(row.account_id);
    if (list) list.push(row);
    else byAccount.set(row.account_id, [row]);
  }
  return new Map(accountIds.map((id) => [id, toBalances(byAccount.get(id) ?? [])]));
}

/**
 * Locks the books of the given merchant accounts (SELECT … FOR UPDATE, in id order so two
 * transactions never deadlock) and returns their balances. Every operation that debits a merchant
 * account calls this first inside its transaction: concurrent debits of one account then run one
 * after another and each sees the balance the previous one left. (PGlite has one connection, so
 * there transactions are already serial.)
 */
export async function lockAccounts(tx: Sql, accountIds: readonly number[]): Promise<Map<number, Balances>> {
  const ids = [...new Set(accountIds)].sort((a, b) => a - b);
  const rows = await tx.query<{ account_id: number; book: string; balance: number }>(
    `SELECT account_id, book, balance FROM ledger_accounts
      WHERE account_id = ANY($1::bigint[]) ORDER BY id FOR UPDATE`,
    [ids],
  );
  const result = new Map<number, Balances>();
  for (const id of ids) result.set(id, toBalances(rows.filter((r) => r.account_id === id)));
  return result;
}

export async function lockAccount(tx: Sql, accountId: number): Promise<Balances> {
  return (await lockAccounts(tx, [accountId])).get(accountId)!;
}

export interface PostInput {
  /** What kind of movement this is (deposit, cash_out_reserve, cash_out_settle, …). */
  kind: string;
  /** The business record it belongs to (a transaction_id, an infraction id, …). */
  reference: string;
  postings: Posting[];
  /** The caller's clock reading, stamped on MED blocks this credit tops up (default: now). */
  now?: Date;
}

/**
 * Writes one balanced ledger transaction. Throws InsufficientFundsError if a merchant book would
 * go negative (callers check the balance under `lockAccounts` first; this is the backstop), and
 * AmountTooLargeError if an entry, a merchant book or a credited account's total would leave the
 * bounds of src/lib/money.ts (`refuseTotalPastMaximum`).
 *
 * The credit primitive: every posting that credits a merchant's `available` book tops up that
 * account's short MED blocks in the same transaction (`coverShortBlocks`, oldest infraction
 * first), so no credit path (PIX received, returns, released reservations, deposits, boleto
 * settlements, released blocks, transfers) can forget it. A block top-up is itself a debit of
 * `available`, so this never recurses. A caller that releases a block into `available` marks the
 * infraction first, so the release does not flow back into the block it leaves.
 */
export async function post(tx: Sql, input: PostInput): Promise<number> {
  const { postings } = input;
  if (postings.length < 2) throw new Error('a ledger transaction needs at least two postings');
  for (const p of postings) {
    if (!Number.isSafeInteger(p.amount) || p.amount === 0) throw new Error(`bad posting amount ${p.amount}`);
    if (Math.abs(p.amount) > MAX_BALANCE_BASE_UNITS) throw new AmountTooLargeError(`a posting of ${p.amount} base units exceeds the maximum balance`);
  }
  if (safeSum(postings.map((p) => p.amount)) !== 0) {
    throw new Error(`unbalanced ledger transaction ${input.kind}/${input.reference}`);
  }
  const codes = postings.map((p) => bookCode(p.book));
  const amounts = postings.map((p) => p.amount);
  let ledgerTransactionId: number;
  try {
    const rows = await tx.query<{ ledger_transaction_id: number }>(
      `WITH t AS (
         INSERT INTO ledger_transactions (kind, reference) VALUES ($1, $2) RETURNING id
       )
       INSERT INTO ledger_entries (ledger_transaction_id, ledger_account_id, amount)
       SELECT t.id, la.id, v.amount
         FROM t
         CROSS JOIN unnest($3::text[], $4::bigint[]) WITH ORDINALITY AS v(code, amount, n)
         JOIN ledger_accounts la ON la.code = v.code
        ORDER BY v.n
       RETURNING ledger_transaction_id`,
      [input.kind, input.reference, codes, amounts],
    );
    if (rows.length !== postings.length) {
      throw new Error(`unknown ledger book among ${codes.join(', ')}`);
    }
    ledgerTransactionId = rows[0]!.ledger_transaction_id;
  } catch (err) {
    if (sqlState(err) === CHECK_VIOLATION && constraintName(err) === 'ledger_accounts_balance_non_negative') {
      throw new InsufficientFundsError('a merchant book would go negative');
    }
    if (sqlState(err) === CHECK_VIOLATION && BOUND_CONSTRAINTS.has(constraintName(err) ?? '')) {
      throw new AmountTooLargeError('the credit would take the account balance past its maximum');
    }
    throw err;
  }
  await refuseTotalPastMaximum(tx, postings);
  const credited = new Set<number>();
  for (const p of postings) {
    if (typeof p.book !== 'string' && p.book.book === 'available' && p.amount > 0) credited.add(p.book.accountId);
  }
  for (const accountId of credited) await coverShortBlocks(tx, accountId, input.now ?? new Date());
  return ledgerTransactionId;
}

/**
 * The bound of an account as a whole: a posting that brings money into a merchant account (its
 * books' net is positive: a PIX received, a return, a deposit, a transfer in, a boleto settlement)
 * may not take the sum of its three books past MAX_BALANCE_BASE_UNITS. The CHECK of each book
 * alone (migration 0510) is not enough: money reserved in `pending` (or blocked) comes back to
 * `available` by a movement that cannot be refused — a rejected payout, a failed refund, a
 * released block — and must always fit there. Moves within an account (net zero) and debits read
 * nothing. Checked after the entries, while the credited books are locked (the statement trigger
 * locks them): another movement of the account can then only lower its total.
 */
async function refuseTotalPastMaximum(tx: Sql, postings: readonly Posting[]): Promise<void> {
  const net = new Map<number, number>();
  for (const p of postings) {
    if (typeof p.book !== 'string') net.set(p.book.accountId, (net.get(p.book.accountId) ?? 0) + p.amount);
  }
  const raised = [...net].filter(([, amount]) => amount > 0).map(([accountId]) => accountId);
  if (raised.length === 0) return;
  const over = await tx.query(
    'SELECT account_id FROM ledger_accounts WHERE account_id = ANY($1::bigint[]) GROUP BY account_id HAVING sum(balance) > $2',
    [raised, MAX_BALANCE_BASE_UNITS],
  );
  if (over.length > 0) throw new AmountTooLargeError('the credit would take the account balance past its maximum');
}

/**
 * Moves `amount` between two books of one merchant account (available -> pending for a reservation,
 * available -> blocked for a MED block, and back), as one ledger transaction.
 */
export async function moveWithinAccount(
  tx: Sql,
  input: { kind: string; reference: string; accountId: number; from: MerchantBook; to: MerchantBook; amount: number; now?: Date },
): Promise<number> {
  return post(tx, {
    kind: input.kind,
    reference: input.reference,
    ...(input.now ? { now: input.now } : {}),
    postings: [
      { book: { accountId: input.accountId, book: input.from }, amount: -input.amount },
      { book: { accountId: input.accountId, book: input.to }, amount: input.amount },
    ],
  });
}

/**
 * The ledger's credit rule for MED: tops up the account's open blocks that are short of their
 * amount from its available balance, oldest infraction first, in the caller's transaction (`post`
 * calls it after every credit of an `available` book; the creation of an infraction calls it for
 * the block itself). Costs one index probe when there is none (nearly always); otherwise locks the
 * account's books, then the infractions (the fixed order). Each top-up is an available -> blocked
 * move referenced by the infraction id (`med_block`), like the block itself (src/med/blocks.ts).
 */
export async function coverShortBlocks(tx: Sql, accountId: number, now: Date): Promise<void> {
  if (!(await shortBlocks.hasShortBlocks(tx, accountId))) return;
  let { available } = await lockAccount(tx, accountId);
  for (const infraction of await shortBlocks.lockShortBlocks(tx, accountId)) {
    if (available <= 0) return;
    const take = Math.min(available, infraction.amount - infraction.blocked_amount);
    await moveWithinAccount(tx, { kind: 'med_block', reference: infraction.id, accountId, from: 'available', to: 'blocked', amount: take });
    await shortBlocks.addBlocked(tx, infraction.id, take, now);
    available -= take;
  }
}
