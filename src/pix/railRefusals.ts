import type { Logger } from 'pino';
import type { Sql } from '../db/db.js';
import type { RailNotification, Refusal } from '../rail/rail.js';
import { recordNotification } from './store/railInbox.js';

/**
 * Money the rail brings that this institution refuses, as the receiving side, instead of crediting
 * it: the payer keeps it (docs/pix.md, "Refused credits"). A refusal is recorded in `rail_refusals`
 * together with the notification id in `rail_inbox` (migration 0690), in a transaction of its own —
 * the one that tried to credit rolled back — so it is never applied later, never retried, and a
 * redelivery is answered with the same refusal.
 */

export const REFUSAL = {
  /** ISO 20022 AM02, NotAllowedAmount: the credit would take the account past MAX_BALANCE_BASE_UNITS. */
  balanceLimit: { code: 'AM02', reason: 'The receiving account cannot hold this amount: it would exceed the maximum balance' },
  /** ISO 20022 AC03, InvalidCreditorAccountNumber: the payment names no account of this institution. */
  accountNotFound: { code: 'AC03', reason: 'The receiving account does not exist' },
  payoutNotFound: { code: 'ORIGINAL_NOT_FOUND', reason: 'The returned payment is not a payout of this institution' },
  payoutNotSettled: { code: 'ORIGINAL_NOT_SETTLED', reason: 'The returned payout has not settled' },
  returnExceeded: { code: 'RETURN_AMOUNT_EXCEEDED', reason: 'The return exceeds what remains of the settled payout' },
} as const satisfies Record<string, Refusal>;

/** Thrown by a handler that refuses the notification it is applying (its transaction rolls back). */
export class RefusedNotification extends Error {
  override name = 'RefusedNotification';
  constructor(
    readonly refusal: Refusal,
    /** The account the money was for, when the handler knows it. */
    readonly accountId: number | null = null,
  ) {
    super(`${refusal.code}: ${refusal.reason}`);
  }
}

/** The notifications that bring money in, and so can be refused. */
export type CreditNotification = Extract<RailNotification, { kind: 'inbound.payment' | 'payment.returned' }>;

export function isCredit(n: RailNotification): n is CreditNotification {
  return n.kind === 'inbound.payment' || n.kind === 'payment.returned';
}

export interface RailRefusalRow {
  notification_id: string;
  kind: string;
  end_to_end_id: string;
  account_id: number | null;
  amount: number;
  reason_code: string;
  reason: string;
  refused_at: Date;
}

/** The refusal recorded for a notification, if it was refused. */
export async function findRefusal(sql: Sql, notificationId: string): Promise<Refusal | undefined> {
  const [row] = await sql.query<{ code: string; reason: string }>('SELECT reason_code AS code, reason FROM rail_refusals WHERE notification_id = $1', [notificationId]);
  return row;
}

/** The refusal of the payment (or return) with this end-to-end id, if it was refused. */
export async function findRefusalByEndToEndId(sql: Sql, endToEndId: string): Promise<RailRefusalRow | undefined> {
  const [row] = await sql.query<RailRefusalRow>('SELECT * FROM rail_refusals WHERE end_to_end_id = $1 ORDER BY refused_at LIMIT 1', [endToEndId]);
  return row;
}

/**
 * Records the refusal of `n` with its id in rail_inbox, in the caller's transaction. Returns the
 * answer to give: this refusal, or — when the notification was handled meanwhile (a concurrent
 * delivery) — what that handling answered.
 */
export async function recordRefusal(tx: Sql, log: Logger, n: CreditNotification, refusal: Refusal, accountId: number | null): Promise<Refusal | undefined> {
  if (!(await recordNotification(tx, n.id, n.kind, n.at))) return findRefusal(tx, n.id);
  const endToEndId = n.kind === 'inbound.payment' ? n.endToEndId : n.returnEndToEndId;
  await tx.query(
    `INSERT INTO rail_refusals (notification_id, kind, end_to_end_id, account_id, amount, reason_code, reason)
     VALUES ($1, $2, $3, $4, $5, $6, $7)`,
    [n.id, n.kind, endToEndId, accountId, n.amount, refusal.code, refusal.reason],
  );
  log.warn(
    { notification: n.id, kind: n.kind, end_to_end_id: endToEndId, account_id: accountId, ...(n.kind === 'payment.returned' ? { payout_end_to_end_id: n.endToEndId } : {}), amount: n.amount, reason_code: refusal.code },
    'rail credit refused back to the payer',
  );
  return refusal;
}
