import { bankName } from '../lib/banks.js';
import { isoZ } from '../lib/clock.js';
import { addMoney } from '../lib/money.js';
import { TX_STATUS, type RecordRow, type TransactionRow } from './repository.js';

/**
 * How a statement record is shown: the spec's statement item, the richer record of the
 * transaction lookups, and the receipt.
 */

/** Display value of the internal status (spec: "Statement status filter vs display"). */
const DISPLAY: Record<number, string> = { 1: 'completed', 2: 'pending', 3: 'rejected', 4: 'failed' };

export function netAmount(row: Pick<TransactionRow, 'direction' | 'amount' | 'fee_amount'>): number {
  return row.direction === 'outbound' ? addMoney(row.amount, row.fee_amount) : row.amount - row.fee_amount;
}

/**
 * The spec's statement item. `merged`: an outbound PIX in flight merged on page 1, shown as status
 * `pending`, payment_status `processing`, completed_at null.
 */
export function statementItem(row: TransactionRow, merged = false) {
  const outbound = row.direction === 'outbound';
  return {
    id: row.id,
    transaction_id: row.transaction_id,
    end_to_end_id: row.end_to_end_id,
    external_id: row.external_id,
    type: row.type,
    status: merged ? 'pending' : (DISPLAY[row.status] ?? 'pending'),
    payment_status: merged ? 'processing' : row.payment_status,
    amount: row.amount,
    fee_amount: row.fee_amount,
    net_amount: netAmount(row),
    description: row.description,
    direction: row.direction,
    counterparty_name: row.counterparty_name,
    recipient_key: outbound ? row.recipient_key : null,
    payer_document: outbound ? null : row.payer_document,
    recipient_document: outbound ? row.recipient_document : null,
    payer_ispb: outbound ? null : row.payer_ispb,
    payer_bank_name: outbound ? null : row.payer_bank_name,
    created_at: isoZ(row.created_at),
    completed_at: merged ? null : isoZ(row.completed_at),
  };
}

/**
 * A record as the transaction lookups show it: the statement item's fields with the actual
 * payment_status, plus `final`, `tag`, the recipient's key type, ISPB and bank, the original of a
 * refund or return, what came back of a payout, and the reason of a rejection or failure.
 */
export function transactionRecord(row: RecordRow) {
  const outbound = row.direction === 'outbound';
  return {
    ...statementItem(row),
    // An open (unpaid) charge is stage 3 but still pending: final only once its status is settled.
    final: row.stage === 3 && !(row.kind === 'charge' && row.status === TX_STATUS.pending),
    tag: row.tag,
    recipient_key_type: outbound ? row.recipient_key_type : null,
    recipient_ispb: outbound ? row.recipient_ispb : null,
    recipient_bank_name: outbound ? (row.recipient_bank_name ?? bankName(row.recipient_ispb)) : null,
    original_transaction_id: row.original_transaction_id,
    returned_amount: row.kind === 'cash_out' ? row.returned_amount : null,
    reason_code: row.reason_code,
    updated_at: isoZ(row.updated_at),
  };
}

export interface Holder {
  name: string;
  document: string;
}

/**
 * The receipt of a settled PIX (spec: payer, receiver, amount, date, end-to-end id). `holder` is
 * the merchant, `institution` this institution (the merchant's side of the payment).
 */
export function receipt(row: TransactionRow, holder: Holder, institution: { ispb: string; name: string }) {
  const merchantSide = { name: holder.name, document: holder.document, ispb: institution.ispb, bank_name: institution.name, pix_key: null };
  const outbound = row.direction === 'outbound';
  const counterparty = outbound
    ? {
        name: row.counterparty_name,
        document: row.recipient_document,
        ispb: row.recipient_ispb,
        bank_name: row.recipient_bank_name ?? bankName(row.recipient_ispb),
        pix_key: row.recipient_key,
      }
    : { name: row.counterparty_name, document: row.payer_document, ispb: row.payer_ispb, bank_name: row.payer_bank_name, pix_key: null };
  return {
    worked: true,
    transaction_id: row.transaction_id,
    end_to_end_id: row.end_to_end_id,
    type: row.type,
    direction: row.direction,
    amount: row.amount,
    description: row.description,
    date: isoZ(row.completed_at),
    payer: outbound ? merchantSide : counterparty,
    receiver: outbound ? counterparty : merchantSide,
  };
}
