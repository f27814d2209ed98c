import type { AppContext } from '../context.js';
import type { Sql } from '../db/db.js';
import { INSTITUTION_BOOK, lockAccount, post, type Posting } from '../ledger/ledger.js';
import { bankName } from '../lib/banks.js';
import { isoZ } from '../lib/clock.js';
import { newTransactionId, TX_PREFIX } from '../lib/ids.js';
import { centsToBaseUnits } from '../lib/money.js';
import * as merchants from '../merchants/repository.js';
import { insertTransaction, TX_STATUS } from '../transactions/repository.js';
import { emitFor } from './events.js';
import * as repo from './repository.js';
import type { OwnedTransaction } from './repository.js';

export interface InboundPayment {
  endToEndId: string;
  /** Base units. */
  amount: number;
  accountId: number;
  payer: { name: string; document: string; ispb: string };
  description: string | null;
  /** The charge id the payer's BR Code carried, if any. */
  txid: string | null;
  receivedAt: Date;
}

/**
 * The one place an incoming PIX credits an account, in the caller's transaction: the statement
 * record (`pix_in`, inbound, completed, with the payer's name, document, ISPB and bank), the
 * ledger entries (central bank -> available, minus the account's cash-in fee -> fees) and
 * `pix.charge.paid`. Idempotent on the end-to-end id: a payment already credited returns its record.
 *
 * The fee is capped at the amount, so a payment smaller than the fee credits nothing and is
 * still recorded.
 *
 * Charge matching: `txid` identifies the cash-in charge the payer paid (its BR Code carried it).
 * The cash-in work matches the payment to its charge here, before the generic record is written.
 */
export async function receiveInboundPayment(tx: Sql, ctx: AppContext, p: InboundPayment): Promise<OwnedTransaction> {
  const already = await repo.findByEndToEndId(tx, p.endToEndId);
  if (already) return already;
  await lockAccount(tx, p.accountId);
  const account = await merchants.findAccount(tx, p.accountId);
  if (!account) throw new Error(`inbound payment ${p.endToEndId} for unknown account ${p.accountId}`);
  const fee = Math.min(centsToBaseUnits(account.cash_in_fee_cents), p.amount);
  const row = await insertTransaction(tx, {
    transaction_id: newTransactionId(TX_PREFIX.inbound, p.receivedAt),
    account_id: account.id,
    kind: 'pix_in',
    type: 'pix',
    direction: 'inbound',
    status: TX_STATUS.completed,
    stage: 3,
    end_to_end_id: p.endToEndId,
    amount: p.amount,
    fee_amount: fee,
    description: p.description ?? '',
    counterparty_name: p.payer.name,
    payer_document: p.payer.document,
    payer_ispb: p.payer.ispb,
    payer_bank_name: bankName(p.payer.ispb, { ispb: ctx.config.institutionIspb, name: ctx.institutionName }),
    metadata: { txid: p.txid },
    created_at: p.receivedAt,
    completed_at: p.receivedAt,
  });
  const postings: Posting[] = [{ book: INSTITUTION_BOOK.centralBank, amount: -p.amount }];
  if (p.amount - fee > 0) postings.push({ book: { accountId: account.id, book: 'available' }, amount: p.amount - fee });
  if (fee > 0) postings.push({ book: INSTITUTION_BOOK.fees, amount: fee });
  await post(tx, { kind: 'pix_in', reference: row.transaction_id, postings });
  const owned = { ...row, merchant_id: account.merchant_id };
  await emitFor(tx, 'pix.charge.paid', owned, {
    transaction_id: row.transaction_id,
    end_to_end_id: row.end_to_end_id,
    account_id: row.account_id,
    direction: 'credit',
    amount: row.amount,
    fee_amount: row.fee_amount,
    net_amount: row.amount - row.fee_amount,
    payer: { name: p.payer.name, document: p.payer.document, ispb: p.payer.ispb, bank_name: row.payer_bank_name },
    description: p.description,
    txid: p.txid,
    paid_at: isoZ(p.receivedAt),
  });
  return owned;
}
