import type { Sql } from '../db/db.js';
import type { InfractionDecision } from '../rail/rail.js';

/** SQL of MED infractions (table `med_infractions`, migration 0450). */

export const MED_STATUSES = ['OPEN', 'defense_submitted', 'CLOSED', 'CANCELLED'] as const;
export type MedStatus = (typeof MED_STATUSES)[number];
/** Not resolved yet: the block holds and voluntary refunds of the original are refused (rule 5). */
export const OPEN_STATUSES: readonly MedStatus[] = ['OPEN', 'defense_submitted'];
export type RefundStatus = 'requested' | 'processing' | 'settled' | 'released' | 'failed';

export interface Attachment {
  name?: string | undefined;
  url?: string | undefined;
  text?: string | undefined;
}

/** An infraction with what is shown beside it: its original PIX and its refund. */
export interface InfractionRow {
  id: string;
  account_id: number;
  merchant_id: number;
  original_id: string;
  end_to_end_id: string;
  status: MedStatus;
  reason: string;
  amount: number;
  blocked_amount: number;
  refunded_amount: number;
  released_amount: number;
  refund_status: RefundStatus;
  refund_id: string | null;
  decision: InfractionDecision | null;
  defense_text: string | null;
  defense_attachments: Attachment[] | null;
  defense_submitted_at: Date | null;
  defense_deadline: Date;
  created_at: Date;
  updated_at: Date;
  resolved_at: Date | null;
  original_transaction_id: string;
  original_amount: number;
  payer_name: string;
  payer_document: string | null;
  payer_ispb: string | null;
  payer_bank_name: string | null;
  refund_transaction_id: string | null;
  refund_end_to_end_id: string | null;
  refund_amount: number | null;
  refund_completed_at: Date | null;
}

const SELECT = `SELECT i.*, a.merchant_id,
       o.transaction_id AS original_transaction_id, o.amount AS original_amount, o.counterparty_name AS payer_name,
       o.payer_document, o.payer_ispb, o.payer_bank_name,
       r.transaction_id AS refund_transaction_id, r.end_to_end_id AS refund_end_to_end_id, r.amount AS refund_amount,
       r.completed_at AS refund_completed_at
  FROM med_infractions i
  JOIN accounts a ON a.id = i.account_id
  JOIN transactions o ON o.id = i.original_id
  LEFT JOIN transactions r ON r.id = i.refund_id`;

export interface NewInfraction {
  id: string;
  accountId: number;
  originalId: string;
  endToEndId: string;
  reason: string;
  amount: number;
  defenseDeadline: Date;
  createdAt: Date;
}

/** Inserts an infraction unless its id exists; true when inserted. */
export async function insertInfraction(tx: Sql, n: NewInfraction): Promise<boolean> {
  const rows = await tx.query(
    `INSERT INTO med_infractions (id, account_id, original_id, end_to_end_id, reason, amount, defense_deadline, created_at, updated_at)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $8) ON CONFLICT (id) DO NOTHING RETURNING id`,
    [n.id, n.accountId, n.originalId, n.endToEndId, n.reason, n.amount, n.defenseDeadline, n.createdAt],
  );
  return rows.length === 1;
}

export async function findInfraction(sql: Sql, id: string): Promise<InfractionRow | undefined> {
  const [row] = await sql.query<InfractionRow>(`${SELECT} WHERE i.id = $1`, [id]);
  return row;
}

/** Locks an infraction (after its account's books: callers keep the fixed lock order). */
export async function lockInfraction(tx: Sql, id: string): Promise<InfractionRow> {
  const [row] = await tx.query<InfractionRow>(`${SELECT} WHERE i.id = $1 FOR UPDATE OF i`, [id]);
  if (!row) throw new Error(`infraction ${id} disappeared`);
  return row;
}

/** An infraction of an account (another account's is not found), optionally locked. */
export async function findForAccount(sql: Sql, accountId: number, id: string, lock = false): Promise<InfractionRow | undefined> {
  const [row] = await sql.query<InfractionRow>(`${SELECT} WHERE i.id = $1 AND i.account_id = $2${lock ? ' FOR UPDATE OF i' : ''}`, [id, accountId]);
  return row;
}

export interface ListFilter {
  accountId: number;
  status?: MedStatus | undefined;
  endToEndId?: string | undefined;
  /** Inclusive lower bound of created_at. */
  from?: Date | undefined;
  /** Exclusive upper bound of created_at. */
  before?: Date | undefined;
  limit: number;
  offset: number;
}

/** GET /med: newest first. */
export async function listForAccount(sql: Sql, f: ListFilter): Promise<InfractionRow[]> {
  const params: unknown[] = [];
  const p = (v: unknown) => `$${params.push(v)}`;
  const where = [`i.account_id = ${p(f.accountId)}`];
  if (f.status) where.push(`i.status = ${p(f.status)}`);
  if (f.endToEndId) where.push(`i.end_to_end_id = ${p(f.endToEndId)}`);
  if (f.from) where.push(`i.created_at >= ${p(f.from)}`);
  if (f.before) where.push(`i.created_at < ${p(f.before)}`);
  return sql.query<InfractionRow>(
    `${SELECT} WHERE ${where.join(' AND ')} ORDER BY i.created_at DESC, i.id DESC LIMIT ${p(f.limit)} OFFSET ${p(f.offset)}`,
    params,
  );
}

/** Refund rule 5: whether a received PIX has an infraction not resolved yet. */
export async function hasOpenInfraction(sql: Sql, originalId: string): Promise<boolean> {
  const rows = await sql.query(`SELECT 1 FROM med_infractions WHERE original_id = $1 AND status IN ('OPEN', 'defense_submitted') LIMIT 1`, [originalId]);
  return rows.length > 0;
}

export interface InfractionChange {
  status?: MedStatus;
  decision?: InfractionDecision;
  /** Added to the current values. */
  blockedDelta?: number;
  refundedDelta?: number;
  releasedDelta?: number;
  refundStatus?: RefundStatus;
  refundId?: string;
  defense?: { text: string; attachments: Attachment[]; submittedAt: Date };
  resolvedAt?: Date;
}

/** Applies a change to a locked infraction. */
export async function updateInfraction(tx: Sql, id: string, c: InfractionChange, now: Date): Promise<void> {
  await tx.query(
    `UPDATE med_infractions SET
       status = COALESCE($2, status),
       decision = COALESCE($3, decision),
       blocked_amount = blocked_amount + $4,
       refunded_amount = refunded_amount + $5,
       released_amount = released_amount + $6,
       refund_status = COALESCE($7, refund_status),
       refund_id = COALESCE($8, refund_id),
       defense_text = COALESCE($9, defense_text),
       defense_attachments = COALESCE($10::jsonb, defense_attachments),
       defense_submitted_at = COALESCE($11, defense_submitted_at),
       resolved_at = COALESCE($12, resolved_at),
       updated_at = $13
     WHERE id = $1`,
    [
      id,
      c.status ?? null,
      c.decision ?? null,
      c.blockedDelta ?? 0,
      c.refundedDelta ?? 0,
      c.releasedDelta ?? 0,
      c.refundStatus ?? null,
      c.refundId ?? null,
      c.defense?.text ?? null,
      c.defense ? JSON.stringify(c.defense.attachments) : null,
      c.defense?.submittedAt ?? null,
      c.resolvedAt ?? null,
      now,
    ],
  );
}
