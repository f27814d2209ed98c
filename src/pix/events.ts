import type { Sql } from '../db/db.js';
import { emitEvent } from '../events/outbox.js';
import { isoZ } from '../lib/clock.js';
import { addMoney } from '../lib/money.js';
import type { OwnedTransaction } from './repository.js';

/**
 * Bodies of the PIX events this domain writes to the outbox (delivered by the webhook engine).
 * Every body carries the catalog's `status`, the subject's `transaction_id` and `end_to_end_id`,
 * amounts in base units and dates in ISO 8601 with Z. See docs/pix.md, "Events".
 */

type Payload = Record<string, unknown>;

/** Writes `event` about `row` (its subject is the row's transaction_id) in the caller's transaction. */
export async function emitFor(tx: Sql, event: string, row: OwnedTransaction, payload: Payload): Promise<void> {
  await emitEvent(tx, { event, merchantId: row.merchant_id, accountId: row.account_id, subject: row.transaction_id, payload });
}

/** What every `pix.payout.*` event says about the payout. */
export function payoutBody(row: OwnedTransaction): Payload {
  const meta = row.metadata as { txid?: string | null };
  return {
    transaction_id: row.transaction_id,
    end_to_end_id: row.end_to_end_id,
    external_id: row.external_id,
    account_id: row.account_id,
    direction: 'debit',
    amount: row.amount,
    fee_amount: row.fee_amount,
    net_amount: addMoney(row.amount, row.fee_amount),
    pix_key: row.recipient_key,
    pix_key_type: row.recipient_key_type,
    receiver: {
      name: row.counterparty_name,
      document: row.recipient_document,
      ispb: row.recipient_ispb,
      bank_name: row.recipient_bank_name,
    },
    description: row.description || null,
    txid: meta.txid ?? null,
    created_at: isoZ(row.created_at),
  };
}

/** Refund totals of rule 6. `isPartial`: this refund returns less than the original amount. */
export function refundTotalsBody(originalAmount: number, executed: number, thisAmount: number): Payload {
  return {
    total_refunded: executed,
    remaining_refundable: originalAmount - executed,
    is_partial: thisAmount < originalAmount,
  };
}

/** What every `pix.refund.*` event says about the refund. */
export function refundBody(refund: OwnedTransaction, original: OwnedTransaction): Payload {
  return {
    transaction_id: refund.transaction_id,
    end_to_end_id: refund.end_to_end_id,
    original_transaction_id: original.transaction_id,
    original_end_to_end_id: original.end_to_end_id,
    account_id: refund.account_id,
    amount: refund.amount,
    original_amount: original.amount,
    reason: refund.return_code,
    description: refund.description,
    created_at: isoZ(refund.created_at),
  };
}
