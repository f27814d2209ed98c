import type { Sql } from '../db/db.js';

/**
 * Statement records (table `transactions`): one row per money movement a merchant sees. Written by
 * the domains that move money (deposits, PIX, boleto settlements) in the same database transaction
 * as their ledger postings.
 */
export interface TransactionRow {
  id: string;
  transaction_id: string;
  account_id: number;
  kind: string;
  type: 'pix' | 'ted' | 'internal';
  direction: 'inbound' | 'outbound';
  status: number;
  payment_status: string | null;
  stage: number;
  end_to_end_id: string | null;
  external_id: string | null;
  tag: string | null;
  amount: number;
  fee_amount: number;
  description: string;
  counterparty_name: string;
  recipient_key: string | null;
  recipient_key_type: string | null;
  recipient_document: string | null;
  recipient_ispb: string | null;
  payer_document: string | null;
  payer_ispb: string | null;
  payer_bank_name: string | null;
  original_id: string | null;
  request_fingerprint: string | null;
  metadata: Record<string, unknown>;
  created_at: Date;
  updated_at: Date;
  completed_at: Date | null;
}

/** Internal status codes of a statement record. */
export const TX_STATUS = { completed: 1, pending: 2, rejected: 3, failed: 4 } as const;

export type NewTransaction = Pick<TransactionRow, 'transaction_id' | 'account_id' | 'kind' | 'type' | 'direction' | 'status' | 'amount'> &
  Partial<Omit<TransactionRow, 'id' | 'created_at' | 'updated_at'>> & { created_at?: Date };

const COLUMNS = [
  'transaction_id', 'account_id', 'kind', 'type', 'direction', 'status', 'payment_status', 'stage',
  'end_to_end_id', 'external_id', 'tag', 'amount', 'fee_amount', 'description', 'counterparty_name',
  'recipient_key', 'recipient_key_type', 'recipient_document', 'recipient_ispb', 'payer_document',
  'payer_ispb', 'payer_bank_name', 'original_id', 'request_fingerprint', 'metadata', 'created_at',
  'completed_at',
] as const;

export async function insertTransaction(tx: Sql, record: NewTransaction): Promise<TransactionRow> {
  const present = COLUMNS.filter((c) => record[c as keyof NewTransaction] !== undefined);
  const values = present.map((c) => {
    const v = record[c as keyof NewTransaction];
    return c === 'metadata' ? JSON.stringify(v) : v;
  });
  const [row] = await tx.query<TransactionRow>(
    `INSERT INTO transactions (${present.join(', ')})
     VALUES (${present.map((c, i) => (c === 'metadata' ? `$${i + 1}::jsonb` : `$${i + 1}`)).join(', ')})
     RETURNING *`,
    values,
  );
  return row!;
}
