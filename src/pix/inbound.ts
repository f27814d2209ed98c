import type { TxDeps } from './deps.js';
import type { Sql } from '../db/db.js';
import { INSTITUTION_BOOK, lockAccount, post, type Posting } from '../ledger/ledger.js';
import { bankName } from '../lib/banks.js';
import { isoZ } from '../lib/clock.js';
import { newTransactionId, TX_PREFIX } from '../lib/ids.js';
import { centsToBaseUnits } from '../lib/money.js';
import * as merchants from '../merchants/repository.js';
import { completeChargeRecord, insertTransaction, TX_STATUS } from '../transactions/records.js';
import { emitChargeEvent, expireCharges, matchInboundPayment } from './cashin/charges.js';
import * as charges from './cashin/repository.js';
import { noticeForKey } from '../apiPix/pixNotices.js';
import { emitFor } from './events.js';
import { REFUSAL, RefusedNotification } from './railRefusals.js';
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
 * record (inbound, completed, with the payer's name, document, ISPB and bank), the ledger entries
 * (central bank -> available, minus the account's cash-in fee -> fees) and `pix.charge.paid`.
 * Idempotent on the end-to-end id: a payment already credited returns its record.
 *
 * The fee is capped at the amount, so a payment smaller than the fee credits nothing and is
 * still recorded.
 *
 * Charge matching, in the same transaction (docs/cash-in.md, "Paying a charge"): when the payment
 * carries the txid of an open charge of this account, for its amount and before its deadline, the
 * charge's own record becomes the credit (status paid, one `pix.charge.paid` about the charge).
 * Anything else is credited as a plain `PIXIN` record and the charge is left as it is, except that
 * a charge found past its deadline and not yet swept is expired here.
 *
 * Open MED blocks of the account that are short take what the credit brought (the ledger's credit
 * primitive tops them up).
 *
 * A payment this institution cannot take is refused (src/pix/railRefusals.ts): for no account of
 * its own (RefusedNotification, AC03), or past the account's maximum balance (the ledger's
 * AmountTooLargeError, AM02); the caller's transaction rolls back and nothing is credited.
 */
export async function receiveInboundPayment(tx: Sql, ctx: TxDeps, p: InboundPayment): Promise<OwnedTransaction> {
  const already = await repo.findByEndToEndId(tx, p.endToEndId);
  if (already) return already;
  await lockAccount(tx, p.accountId);
  const account = await merchants.findAccount(tx, p.accountId);
  if (!account) throw new RefusedNotification(REFUSAL.accountNotFound);
  const fee = Math.min(centsToBaseUnits(account.cash_in_fee_cents), p.amount);
  const payerBankName = bankName(p.payer.ispb, { ispb: ctx.config.institutionIspb, name: ctx.institutionName });
  const payer = { name: p.payer.name, document: p.payer.document, ispb: p.payer.ispb, bank_name: payerBankName };
  const now = ctx.clock.now();

  const match = await matchInboundPayment(tx, { accountId: account.id, txid: p.txid, amount: p.amount, at: p.receivedAt });
  let owned: OwnedTransaction;
  if (match.matched) {
    const charge = match.charge;
    await charges.markPaid(tx, charge.id, p.receivedAt);
    const row = await completeChargeRecord(tx, charge.id, {
      endToEndId: p.endToEndId,
      feeAmount: fee,
      payerName: p.payer.name,
      payerDocument: p.payer.document,
      payerIspb: p.payer.ispb,
      payerBankName,
      paidAt: p.receivedAt,
      now,
      amount: p.amount,
    });
    owned = { ...row, merchant_id: account.merchant_id };
  } else {
    if (match.reason === 'expired' && match.charge?.status === 'created') await expireCharges(tx, [match.charge], now);
    const row = await insertPlainCredit(tx, p, account.id, fee, payerBankName, match.reason);
    owned = { ...row, merchant_id: account.merchant_id };
  }

  const postings: Posting[] = [{ book: INSTITUTION_BOOK.centralBank, amount: -p.amount }];
  if (p.amount - fee > 0) postings.push({ book: { accountId: account.id, book: 'available' }, amount: p.amount - fee });
  if (fee > 0) postings.push({ book: INSTITUTION_BOOK.fees, amount: fee });
  await post(tx, { kind: 'pix_in', reference: owned.transaction_id, postings, now });

  const paid = {
    end_to_end_id: p.endToEndId,
    account_id: account.id,
    direction: 'credit',
    amount: p.amount,
    fee_amount: fee,
    net_amount: p.amount - fee,
    payer,
    description: p.description,
    paid_at: isoZ(p.receivedAt),
  };
  if (match.matched) {
    await emitChargeEvent(tx, { ...match.charge, status: 'paid', paid_at: p.receivedAt }, 'paid', paid);
    // A Pix with a txid: its key's API Pix webhook, if any, is told (src/apiPix/pixNotices.ts).
    await noticeForKey(tx, { accountId: account.id, chave: match.charge.pix_key, endToEndId: p.endToEndId });
  } else await emitFor(tx, 'pix.charge.paid', owned, { transaction_id: owned.transaction_id, ...paid, txid: p.txid });
  return owned;
}

/** The statement record of a PIX received that paid no charge (`PIXIN`, completed). */
function insertPlainCredit(tx: Sql, p: InboundPayment, accountId: number, fee: number, payerBankName: string | null, reason: string) {
  return insertTransaction(tx, {
    transaction_id: newTransactionId(TX_PREFIX.inbound, p.receivedAt),
    account_id: accountId,
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
    payer_bank_name: payerBankName,
    // Why a payment that named a charge did not pay it (never which charge of another account).
    charge_unmatched_reason: p.txid === null ? null : reason,
    metadata: { txid: p.txid },
    created_at: p.receivedAt,
    completed_at: p.receivedAt,
  });
}
