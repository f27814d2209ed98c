import type { Sql } from '../db/db.js';

/** Every SQL statement of the boleto domain. */

export type BoletoStatus = 'registered' | 'paid' | 'settled' | 'cancelled';
export const BOLETO_STATUSES = ['registered', 'paid', 'settled', 'cancelled'] as const satisfies readonly BoletoStatus[];

export interface BoletoRow {
  id: number;
  central_key_id: number;
  nosso_numero: string;
  amount_cents: number;
  /** `YYYY-MM-DD` (selected as text: a `date` must not pass through a time zone). */
  due_date: string;
  payer_document: string;
  payer_name: string;
  beneficiary_ispb: string;
  beneficiary_name: string;
  beneficiary_account_id: number | null;
  barcode: string;
  linha_digitavel: string;
  status: BoletoStatus;
  paid_at: Date | null;
  cancelled_at: Date | null;
  settlement_id: string | null;
  settled_at: Date | null;
  created_at: Date;
  updated_at: Date;
}

const BOLETO_COLUMNS = `id, central_key_id, nosso_numero, amount_cents, due_date::text AS due_date, payer_document,
  payer_name, beneficiary_ispb, beneficiary_name, beneficiary_account_id, barcode, linha_digitavel, status,
  paid_at, cancelled_at, settlement_id, settled_at, created_at, updated_at`;

/** What a new boleto is inserted with; status, timestamps of events and settlement start empty. */
export type NewBoleto = Omit<BoletoRow, 'id' | 'status' | 'paid_at' | 'cancelled_at' | 'settlement_id' | 'settled_at' | 'updated_at'>;

/** Inserts a boleto; null when the key already has one with that nosso_numero. */
export async function insertBoleto(sql: Sql, b: NewBoleto): Promise<BoletoRow | null> {
  const [row] = await sql.query<BoletoRow>(
    `INSERT INTO boletos (central_key_id, nosso_numero, amount_cents, due_date, payer_document, payer_name,
       beneficiary_ispb, beneficiary_name, beneficiary_account_id, barcode, linha_digitavel, created_at, updated_at)
     VALUES ($1, $2, $3, $4::date, $5, $6, $7, $8, $9, $10, $11, $12, $12)
     ON CONFLICT (central_key_id, lpad(nosso_numero, 17, '0')) DO NOTHING
     RETURNING ${BOLETO_COLUMNS}`,
    [
      b.central_key_id, b.nosso_numero, b.amount_cents, b.due_date, b.payer_document, b.payer_name,
      b.beneficiary_ispb, b.beneficiary_name, b.beneficiary_account_id, b.barcode, b.linha_digitavel, b.created_at,
    ],
  );
  return row ?? null;
}

/** A key's boleto by nosso_numero (exact string); `lock` takes its row lock inside a transaction. */
export async function findBoleto(sql: Sql, centralKeyId: number, nossoNumero: string, lock = false): Promise<BoletoRow | undefined> {
  const [row] = await sql.query<BoletoRow>(
    `SELECT ${BOLETO_COLUMNS} FROM boletos
      WHERE central_key_id = $1 AND lpad(nosso_numero, 17, '0') = lpad($2, 17, '0') AND nosso_numero = $2
      ${lock ? 'FOR UPDATE' : ''}`,
    [centralKeyId, nossoNumero],
  );
  return row;
}

export interface BoletoFilter {
  nossoNumeros?: string[];
  status?: BoletoStatus;
  /** Only boletos older (smaller id) than this one: the cursor of the previous page. */
  beforeId?: number;
  limit: number;
}

/** A key's boletos, newest first. */
export async function listBoletos(sql: Sql, centralKeyId: number, f: BoletoFilter): Promise<BoletoRow[]> {
  return sql.query<BoletoRow>(
    `SELECT ${BOLETO_COLUMNS} FROM boletos
      WHERE central_key_id = $1
        AND ($2::text[] IS NULL OR nosso_numero = ANY($2::text[]))
        AND ($3::text IS NULL OR status = $3)
        AND ($4::bigint IS NULL OR id < $4)
      ORDER BY id DESC
      LIMIT $5`,
    [centralKeyId, f.nossoNumeros ?? null, f.status ?? null, f.beforeId ?? null, f.limit],
  );
}

/** New amount and due date (with the barcode and line they give) of a registered boleto. */
export async function updateBoletoTerms(
  tx: Sql,
  id: number,
  terms: { amount_cents: number; due_date: string; barcode: string; linha_digitavel: string; updated_at: Date },
): Promise<BoletoRow> {
  const [row] = await tx.query<BoletoRow>(
    `UPDATE boletos SET amount_cents = $2, due_date = $3::date, barcode = $4, linha_digitavel = $5, updated_at = $6
      WHERE id = $1 AND status = 'registered'
      RETURNING ${BOLETO_COLUMNS}`,
    [id, terms.amount_cents, terms.due_date, terms.barcode, terms.linha_digitavel, terms.updated_at],
  );
  if (!row) throw new Error(`boleto ${id} is no longer registered`);
  return row;
}

/** registered → paid or cancelled (the caller holds the row lock and has checked the status). */
export async function setStatusFromRegistered(tx: Sql, id: number, status: 'paid' | 'cancelled', at: Date): Promise<BoletoRow> {
  const [row] = await tx.query<BoletoRow>(
    `UPDATE boletos SET status = $2,
            paid_at = CASE WHEN $2 = 'paid' THEN $3::timestamptz END,
            cancelled_at = CASE WHEN $2 = 'cancelled' THEN $3::timestamptz END,
            updated_at = $3
      WHERE id = $1 AND status = 'registered'
      RETURNING ${BOLETO_COLUMNS}`,
    [id, status, at],
  );
  if (!row) throw new Error(`boleto ${id} is no longer registered`);
  return row;
}

export interface UnsettledBoleto {
  id: number;
  nosso_numero: string;
  amount_cents: number;
  beneficiary_ispb: string;
  beneficiary_account_id: number | null;
}

/**
 * Locks a key's paid, unsettled boletos. SKIP LOCKED: rows another settlement is taking right now
 * are left to it, so two concurrent triggers never take the same boleto (and never wait on each
 * other). Oldest first, at most `limit`.
 */
export async function lockUnsettled(tx: Sql, centralKeyId: number, limit: number): Promise<UnsettledBoleto[]> {
  return tx.query<UnsettledBoleto>(
    `SELECT id, nosso_numero, amount_cents, beneficiary_ispb, beneficiary_account_id
       FROM boletos
      WHERE central_key_id = $1 AND status = 'paid'
      ORDER BY id
      LIMIT $2
      FOR UPDATE SKIP LOCKED`,
    [centralKeyId, limit],
  );
}

/** paid → settled for the given boletos; returns how many changed. */
export async function markSettled(tx: Sql, ids: readonly number[], settlementId: string, at: Date): Promise<number> {
  const rows = await tx.query<{ id: number }>(
    `UPDATE boletos SET status = 'settled', settlement_id = $2, settled_at = $3, updated_at = $3
      WHERE id = ANY($1::bigint[]) AND status = 'paid'
      RETURNING id`,
    [ids, settlementId, at],
  );
  return rows.length;
}

export interface SettlementRow {
  id: string;
  seq: number;
  central_key_id: number;
  beneficiary_ispb: string;
  account_id: number | null;
  boleto_count: number;
  amount_cents: number;
  transaction_id: string | null;
  ledger_transaction_id: number;
  settled_at: Date;
}

export async function insertSettlement(tx: Sql, s: Omit<SettlementRow, 'seq'>): Promise<SettlementRow> {
  const [row] = await tx.query<SettlementRow>(
    `INSERT INTO boleto_settlements (id, central_key_id, beneficiary_ispb, account_id, boleto_count, amount_cents,
       transaction_id, ledger_transaction_id, settled_at)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
     RETURNING *`,
    [s.id, s.central_key_id, s.beneficiary_ispb, s.account_id, s.boleto_count, s.amount_cents, s.transaction_id, s.ledger_transaction_id, s.settled_at],
  );
  return row!;
}

/** A key's settlements, newest first. */
export async function listSettlements(sql: Sql, centralKeyId: number, f: { beforeSeq?: number; limit: number }): Promise<SettlementRow[]> {
  return sql.query<SettlementRow>(
    `SELECT * FROM boleto_settlements
      WHERE central_key_id = $1 AND ($2::bigint IS NULL OR seq < $2)
      ORDER BY seq DESC LIMIT $3`,
    [centralKeyId, f.beforeSeq ?? null, f.limit],
  );
}

export async function findSettlement(sql: Sql, centralKeyId: number, id: string): Promise<SettlementRow | undefined> {
  const [row] = await sql.query<SettlementRow>('SELECT * FROM boleto_settlements WHERE id = $1 AND central_key_id = $2', [id, centralKeyId]);
  return row;
}

/** nosso_numero of the boletos a settlement carried, in the order they were paid in. */
export async function settlementNossoNumeros(sql: Sql, settlementId: string): Promise<string[]> {
  const rows = await sql.query<{ nosso_numero: string }>(
    'SELECT nosso_numero FROM boletos WHERE settlement_id = $1 ORDER BY id',
    [settlementId],
  );
  return rows.map((r) => r.nosso_numero);
}
