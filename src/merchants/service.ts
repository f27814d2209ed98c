import { createHash } from 'node:crypto';
import { constraintName, sqlState, UNIQUE_VIOLATION, type Database, type Sql } from '../db/db.js';
import { DomainError } from '../errors/catalog.js';
import { emitEvent } from '../events/outbox.js';
import { canonicalStringify } from '../lib/canonicalJson.js';
import { isoZ, type Clock } from '../lib/clock.js';
import { newTransactionId, TX_PREFIX } from '../lib/ids.js';
import { centsToBaseUnits } from '../lib/money.js';
import { INSTITUTION_BOOK, openBooks, post, readBalances, type Balances } from '../ledger/ledger.js';
import { insertTransaction, TX_STATUS } from '../transactions/records.js';
import * as repo from './repository.js';

export interface CreatedMerchant {
  merchant: repo.MerchantRow;
  account: repo.AccountRow;
}

/** A merchant and its first account (with its ledger books), in one transaction. */
export async function createMerchant(db: Database, input: { name: string; document: string }): Promise<CreatedMerchant> {
  return db.transaction(async (tx) => {
    const merchant = await repo.insertMerchant(tx, input.name, input.document);
    const account = await repo.insertAccount(tx, merchant.id);
    await openBooks(tx, account.id);
    return { merchant, account };
  });
}

export interface AccountView {
  account: repo.AccountRow;
  balances: Balances;
}

export async function getAccount(db: Database, accountId: number): Promise<AccountView> {
  const account = await repo.findAccount(db, accountId);
  if (!account) throw new DomainError('not_found', { message: 'account not found' });
  return { account, balances: await readBalances(db, accountId) };
}

export async function updateAccount(db: Database, accountId: number, patch: repo.AccountPatch): Promise<AccountView> {
  const account = await db.transaction((tx) => repo.updateAccount(tx, accountId, patch));
  if (!account) throw new DomainError('not_found', { message: 'account not found' });
  return { account, balances: await readBalances(db, accountId) };
}

/** A deposit as answered: the same on a retry with the same Idempotency-Key. */
export interface DepositResult {
  transactionId: string;
  amount: number;
  /** True when this answer is the replay of an earlier deposit under the same key. */
  replayed: boolean;
}

/**
 * Operator deposit: credits the account from the institution's funding book, records an
 * `internal`, inbound, completed statement row and writes `account.deposit.completed` to the
 * outbox, all in one transaction.
 *
 * With an Idempotency-Key, the key is bound to the deposit in that same transaction (a row of
 * `deposit_idempotency_keys`, primary key account + key, inserted before the ledger posting, so a
 * concurrent retry waits on it and then fails the unique key). A retry finds the row and answers the original deposit; the same key with another amount
 * or description is a 409. Without a key every request is a new deposit.
 */
export async function deposit(
  db: Database,
  clock: Clock,
  input: { accountId: number; amountCents: number; description?: string; idempotencyKey?: string },
): Promise<DepositResult> {
  const amount = centsToBaseUnits(input.amountCents);
  const fingerprint = createHash('sha256')
    .update(canonicalStringify({ amount: input.amountCents, description: input.description || null }))
    .digest('hex');
  const key = input.idempotencyKey;
  const replay = async (sql: Sql): Promise<DepositResult | undefined> => {
    if (key === undefined) return undefined;
    const found = await repo.findDepositKey(sql, input.accountId, key);
    if (!found) return undefined;
    if (found.fingerprint !== fingerprint) throw new DomainError('conflict', { message: 'Idempotency-Key was already used for a different deposit on this account' });
    return { transactionId: found.transaction_id, amount: found.amount, replayed: true };
  };
  try {
    return await db.transaction(async (tx) => {
      const account = await repo.findAccount(tx, input.accountId);
      if (!account) throw new DomainError('not_found', { message: 'account not found' });
      const earlier = await replay(tx);
      if (earlier) return earlier;
      return writeDeposit(tx, account, clock.now(), { amount, description: input.description, key, fingerprint });
    });
  } catch (err) {
    // A concurrent request with the same key committed first: answer its deposit.
    if (key !== undefined && sqlState(err) === UNIQUE_VIOLATION && constraintName(err) === 'deposit_idempotency_keys_pkey') {
      const earlier = await replay(db);
      if (earlier) return earlier;
    }
    throw err;
  }
}

/** The deposit's writes in its transaction: the statement record, the key, the ledger credit, the event. */
async function writeDeposit(
  tx: Sql,
  account: { id: number; merchant_id: number },
  now: Date,
  input: { amount: number; description: string | undefined; key: string | undefined; fingerprint: string },
): Promise<DepositResult> {
  const { amount, key, fingerprint } = input;
  const transactionId = newTransactionId(TX_PREFIX.deposit, now);
  const record = await insertTransaction(tx, {
    transaction_id: transactionId,
    account_id: account.id,
    kind: 'deposit',
    type: 'internal',
    direction: 'inbound',
    status: TX_STATUS.completed,
    stage: 3,
    amount,
    description: input.description ?? 'Deposit',
    counterparty_name: 'Operator deposit',
    created_at: now,
    completed_at: now,
  });
  if (key !== undefined) await repo.insertDepositKey(tx, { accountId: account.id, key, fingerprint, transactionId });
  // The credit primitive also tops up the account's short MED blocks.
  await post(tx, {
    kind: 'deposit',
    reference: record.transaction_id,
    now,
    postings: [
      { book: INSTITUTION_BOOK.funding, amount: -amount },
      { book: { accountId: account.id, book: 'available' }, amount },
    ],
  });
  await emitEvent(tx, {
    event: 'account.deposit.completed',
    merchantId: account.merchant_id,
    accountId: account.id,
    subject: record.transaction_id,
    payload: {
      transaction_id: record.transaction_id,
      account_id: account.id,
      amount,
      description: record.description,
      completed_at: isoZ(now),
    },
  });
  return { transactionId: record.transaction_id, amount, replayed: false };
}
