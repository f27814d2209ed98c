import type { Database } from '../db/db.js';
import { notFound } from '../http/errors.js';
import type { Clock } from '../lib/clock.js';
import { newTransactionId, TX_PREFIX } from '../lib/ids.js';
import { centsToBaseUnits } from '../lib/money.js';
import { INSTITUTION_BOOK, openBooks, post, readBalances, type Balances } from '../ledger/ledger.js';
import { coverShortBlocks } from '../med/blocks.js';
import { insertTransaction, TX_STATUS } from '../transactions/repository.js';
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
  if (!account) throw notFound('account not found');
  return { account, balances: await readBalances(db, accountId) };
}

export async function updateAccount(db: Database, accountId: number, patch: repo.AccountPatch): Promise<AccountView> {
  const account = await db.transaction((tx) => repo.updateAccount(tx, accountId, patch));
  if (!account) throw notFound('account not found');
  return { account, balances: await readBalances(db, accountId) };
}

/**
 * Operator deposit: credits the account from the institution's funding book and records an
 * `internal`, inbound, completed statement row.
 */
export async function deposit(
  db: Database,
  clock: Clock,
  input: { accountId: number; amountCents: number; description?: string },
): Promise<{ transactionId: string; amount: number }> {
  const amount = centsToBaseUnits(input.amountCents);
  return db.transaction(async (tx) => {
    const account = await repo.findAccount(tx, input.accountId);
    if (!account) throw notFound('account not found');
    const now = clock.now();
    const record = await insertTransaction(tx, {
      transaction_id: newTransactionId(TX_PREFIX.deposit, now),
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
    await post(tx, {
      kind: 'deposit',
      reference: record.transaction_id,
      postings: [
        { book: INSTITUTION_BOOK.funding, amount: -amount },
        { book: { accountId: account.id, book: 'available' }, amount },
      ],
    });
    await coverShortBlocks(tx, account.id, now);
    return { transactionId: record.transaction_id, amount };
  });
}
