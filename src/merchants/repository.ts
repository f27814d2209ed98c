import type { Sql } from '../db/db.js';

export interface MerchantRow {
  id: number;
  name: string;
  document: string;
  status: 'active' | 'inactive';
  created_at: Date;
}

export interface AccountRow {
  id: number;
  merchant_id: number;
  status: 'active' | 'inactive';
  cash_out_fee_cents: number;
  cash_in_fee_cents: number;
  /** Cash-out limits (docs/pix.md, "Limits"). */
  cash_out_max_amount_cents: number;
  cash_out_daily_limit_cents: number;
  cash_out_nighttime_limit_cents: number;
  created_at: Date;
  updated_at: Date;
}

export async function insertMerchant(tx: Sql, name: string, document: string): Promise<MerchantRow> {
  const [row] = await tx.query<MerchantRow>(
    'INSERT INTO merchants (name, document) VALUES ($1, $2) RETURNING *',
    [name, document],
  );
  return row!;
}

export async function findMerchant(sql: Sql, id: number): Promise<MerchantRow | undefined> {
  const [row] = await sql.query<MerchantRow>('SELECT * FROM merchants WHERE id = $1', [id]);
  return row;
}

export async function insertAccount(tx: Sql, merchantId: number): Promise<AccountRow> {
  const [row] = await tx.query<AccountRow>(
    'INSERT INTO accounts (merchant_id) VALUES ($1) RETURNING *',
    [merchantId],
  );
  return row!;
}

export async function findAccount(sql: Sql, id: number): Promise<AccountRow | undefined> {
  const [row] = await sql.query<AccountRow>('SELECT * FROM accounts WHERE id = $1', [id]);
  return row;
}

/** The merchant's first account: the one a key without an account operates on. */
export async function findPrimaryAccount(sql: Sql, merchantId: number): Promise<AccountRow | undefined> {
  const [row] = await sql.query<AccountRow>(
    'SELECT * FROM accounts WHERE merchant_id = $1 ORDER BY id LIMIT 1',
    [merchantId],
  );
  return row;
}

export interface AccountPatch {
  status?: 'active' | 'inactive';
  cash_out_fee_cents?: number;
  cash_in_fee_cents?: number;
  cash_out_max_amount_cents?: number;
  cash_out_daily_limit_cents?: number;
  cash_out_nighttime_limit_cents?: number;
}

export async function updateAccount(tx: Sql, id: number, patch: AccountPatch): Promise<AccountRow | undefined> {
  const [row] = await tx.query<AccountRow>(
    `UPDATE accounts SET
       status = COALESCE($2, status),
       cash_out_fee_cents = COALESCE($3, cash_out_fee_cents),
       cash_in_fee_cents = COALESCE($4, cash_in_fee_cents),
       cash_out_max_amount_cents = COALESCE($5, cash_out_max_amount_cents),
       cash_out_daily_limit_cents = COALESCE($6, cash_out_daily_limit_cents),
       cash_out_nighttime_limit_cents = COALESCE($7, cash_out_nighttime_limit_cents),
       updated_at = now()
     WHERE id = $1 RETURNING *`,
    [
      id,
      patch.status ?? null,
      patch.cash_out_fee_cents ?? null,
      patch.cash_in_fee_cents ?? null,
      patch.cash_out_max_amount_cents ?? null,
      patch.cash_out_daily_limit_cents ?? null,
      patch.cash_out_nighttime_limit_cents ?? null,
    ],
  );
  return row;
}

export async function countMerchants(sql: Sql): Promise<number> {
  const [row] = await sql.query<{ n: number }>('SELECT count(*)::bigint AS n FROM merchants');
  return row!.n;
}

export interface DepositKeyRow {
  transaction_id: string;
  fingerprint: string;
  /** The deposit's amount (base units), for the replayed answer. */
  amount: number;
}

/** The deposit an operator Idempotency-Key created on this account, if any. */
export async function findDepositKey(sql: Sql, accountId: number, key: string): Promise<DepositKeyRow | undefined> {
  const [row] = await sql.query<DepositKeyRow>(
    `SELECT k.transaction_id, k.fingerprint, t.amount
       FROM deposit_idempotency_keys k JOIN transactions t ON t.transaction_id = k.transaction_id
      WHERE k.account_id = $1 AND k.idempotency_key = $2`,
    [accountId, key],
  );
  return row;
}

/** Binds an operator Idempotency-Key to the deposit it creates (in the deposit's transaction). */
export async function insertDepositKey(tx: Sql, input: { accountId: number; key: string; fingerprint: string; transactionId: string }): Promise<void> {
  await tx.query(
    'INSERT INTO deposit_idempotency_keys (account_id, idempotency_key, fingerprint, transaction_id) VALUES ($1, $2, $3, $4)',
    [input.accountId, input.key, input.fingerprint, input.transactionId],
  );
}
