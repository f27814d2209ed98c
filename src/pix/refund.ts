import type { PixDeps, TxDeps } from './deps.js';
import type { Sql } from '../db/db.js';
import type { IdempotencyBinding } from '../lib/idempotencyKey.js';
import { DomainError } from '../errors/catalog.js';
import { INSTITUTION_BOOK, lockAccount, post, type MerchantBook } from '../ledger/ledger.js';
import { isoZ } from '../lib/clock.js';
import { newEndToEndId, newTransactionId, TX_PREFIX } from '../lib/ids.js';
import { centsToBaseUnits } from '../lib/money.js';
import type { RailNotification, ReturnAck, ReturnOrder } from '../rail/rail.js';
import { insertTransaction, TX_STATUS, type NewTransaction } from '../transactions/records.js';
import { noticeForPix } from '../apiPix/pixNotices.js';
import { emitFor, refundBody, refundTotalsBody } from './events.js';
import { movePending } from './postings.js';
import { assertRefundNotMedTriggered } from './refundMedGuard.js';
import type { RefundRequest } from './refundRequest.js';
import * as repo from './repository.js';
import type { OwnedTransaction } from './repository.js';

/**
 * POST /pix/refund: returns (part of) a PIX the merchant received. Like a cash-out, three steps:
 * reserve (lock the account, rules 2 and 3, the `refund` record at stage 1, available -> pending),
 * rail.sendReturn, record the acknowledgement (202 accepted, or 200 settled when the rail settled it
 * before answering). The outcome arrives as `return.settled` (pix.refund.completed) or
 * `return.rejected` (pix.refund.failed with reason_code) — late or invalid codes are accepted here
 * and rejected by the rail (rule 4).
 */

export interface RefundResponse {
  worked: true;
  transaction_id: string;
  end_to_end_id: string;
  original_transaction_id: string;
  original_end_to_end_id: string | null;
  amount: number;
  reason: string;
  description: string;
  status: 'accepted' | 'settled';
  detail: string;
}

export type RecordRefundAnswer = (tx: Sql, statusCode: number, body: RefundResponse) => Promise<void>;

/** The request's Idempotency-Key: bound to the refund record when it is created, resumed on a retry. */
export type RefundKey = Pick<IdempotencyBinding, 'resumes' | 'bind'> & { record: RecordRefundAnswer };

const NOT_FOUND = 'Transaction not found';
/** Kinds of record that are a PIX received by the merchant (a paid cash-in charge is one too). */
const REFUNDABLE_KINDS = new Set(['pix_in', 'charge']);

export async function refund(ctx: PixDeps, merchantId: number, req: RefundRequest, key: RefundKey) {
  const record = key.record;
  if (key.resumes !== null) {
    // An earlier attempt under this Idempotency-Key created the refund: continue it, create none.
    const bound = await repo.findById(ctx.db, key.resumes);
    if (bound && bound.kind === 'refund' && bound.merchant_id === merchantId) {
      const original = (await repo.findById(ctx.db, bound.original_id!))!;
      if (bound.stage === 1) return submitRefund(ctx, bound, original, record);
      return refundAnswer(bound, original);
    }
  }
  const original = await repo.findForMerchant(ctx.db, merchantId, req.originalId);
  if (!original) throw new DomainError('not_found', { message: NOT_FOUND });
  if (!REFUNDABLE_KINDS.has(original.kind) || original.direction !== 'inbound' || original.status !== TX_STATUS.completed || !original.end_to_end_id) {
    throw new DomainError('unprocessable_entity', { message: 'Only a settled PIX received by the account can be refunded' });
  }
  const amount = req.amountCents === null ? original.amount : centsToBaseUnits(req.amountCents);

  const row = await ctx.db.transaction(async (tx) => {
    const balances = await lockAccount(tx, original.account_id);
    await assertRefundNotMedTriggered(tx, original);
    const totals = await repo.refundTotals(tx, original.id);
    if (totals.open + amount > original.amount) throw new DomainError('unprocessable_entity', { message: 'refund amount exceeds the original transaction' });
    if (balances.safe < amount) throw new DomainError('unprocessable_entity', { message: 'insufficient balance' });
    const now = ctx.clock.now();
    const inserted = await insertTransaction(
      tx,
      returnRecord(ctx, original, { prefix: TX_PREFIX.refund, kind: 'refund', amount, description: req.description, returnCode: req.returnCode, now }),
    );
    await movePending(tx, 'reserve', { kind: 'refund_reserve', reference: inserted.transaction_id, accountId: original.account_id, amount });
    await key.bind(tx, inserted.id);
    return { ...inserted, merchant_id: original.merchant_id };
  });
  return submitRefund(ctx, row, original, record);
}

/**
 * The statement record of a return of `original` to its payer — a voluntary refund or a MED return
 * — at stage 1 (accepted here, not yet sent), with a new `D…` end-to-end id.
 */
export function returnRecord(
  ctx: Pick<TxDeps, 'config'>,
  original: OwnedTransaction,
  r: { prefix: string; kind: string; amount: number; description: string; returnCode: string; now: Date; infractionId?: string },
): NewTransaction {
  return {
    transaction_id: newTransactionId(r.prefix, r.now),
    account_id: original.account_id,
    kind: r.kind,
    type: 'pix',
    direction: 'outbound',
    status: TX_STATUS.pending,
    payment_status: 'processing',
    stage: 1,
    end_to_end_id: newEndToEndId('D', ctx.config.institutionIspb, r.now),
    amount: r.amount,
    description: r.description,
    counterparty_name: original.counterparty_name,
    recipient_document: original.payer_document,
    recipient_ispb: original.payer_ispb,
    original_id: original.id,
    return_code: r.returnCode,
    ...(r.infractionId !== undefined ? { infraction_id: r.infractionId } : {}),
    recipient_bank_name: original.payer_bank_name,
    created_at: r.now,
  };
}

export function returnOrder(row: OwnedTransaction, original: Pick<OwnedTransaction, 'end_to_end_id'>): ReturnOrder {
  return {
    endToEndId: row.end_to_end_id!,
    transactionId: row.transaction_id,
    originalEndToEndId: original.end_to_end_id!,
    amount: row.amount,
    returnCode: row.return_code!,
    description: row.description,
  };
}

async function submitRefund(ctx: PixDeps, row: OwnedTransaction, original: OwnedTransaction, record: RecordRefundAnswer) {
  let ack: ReturnAck | null = null;
  try {
    ack = await ctx.rail.sendReturn(returnOrder(row, original));
  } catch (err) {
    ctx.log.error({ err, transaction_id: row.transaction_id }, 'rail did not answer a return order; it will be sent again');
  }
  return ctx.db.transaction(async (tx) => {
    const current = await applyReturnAck(tx, ctx, row, ack);
    const answer = refundAnswer(current, original);
    await record(tx, answer.statusCode, answer.body);
    return answer;
  });
}

/**
 * The refund answer of a record as it stands: 200 settled once the rail settled it, else 202
 * accepted (a refund rejected later was accepted here; its outcome is pix.refund.failed).
 */
function refundAnswer(current: OwnedTransaction, original: OwnedTransaction): { statusCode: 200 | 202; body: RefundResponse } {
  const settled = current.status === TX_STATUS.completed;
  return {
    statusCode: settled ? 200 : 202,
    body: {
      worked: true,
      transaction_id: current.transaction_id,
      end_to_end_id: current.end_to_end_id!,
      original_transaction_id: original.transaction_id,
      original_end_to_end_id: original.end_to_end_id,
      amount: current.amount,
      reason: current.return_code!,
      description: current.description,
      status: settled ? 'settled' : 'accepted',
      detail: settled ? 'Refund settled' : 'Refund accepted; the outcome follows as pix.refund.completed or pix.refund.failed',
    },
  };
}

/** What settles a return in flight: the books it leaves and the event it writes. */
export type SettleReturn = (tx: Sql, ctx: TxDeps, row: OwnedTransaction, settledAt: Date) => Promise<OwnedTransaction>;

/**
 * Applies the rail's acknowledgement of a stage-1 return; returns the record after it. `settle`:
 * a voluntary refund's by default; the MED flow passes its own (src/med/refunds.ts).
 */
export async function applyReturnAck(
  tx: Sql,
  ctx: TxDeps,
  row: OwnedTransaction,
  ack: ReturnAck | null,
  settle: SettleReturn = settleRefund,
): Promise<OwnedTransaction> {
  if (ack?.status === 'settled') {
    await lockAccount(tx, row.account_id);
    const current = await repo.lockTransaction(tx, row.id);
    if (current.stage === 3) return current;
    return settle(tx, ctx, current, ack.settledAt);
  }
  if (ack?.status === 'accepted') {
    const moved = await repo.markSent(tx, row.id, 'processing', ctx.clock.now());
    if (moved) return moved;
  }
  return repo.lockTransaction(tx, row.id);
}

/**
 * Books a return as settled: its money leaves the account's `from` book (pending for a refund,
 * blocked for a MED return) for the central bank, and the record becomes final.
 */
export async function bookReturnSettled(
  tx: Sql,
  ctx: TxDeps,
  row: OwnedTransaction,
  settledAt: Date,
  ledger: { kind: string; from: MerchantBook },
): Promise<OwnedTransaction> {
  await post(tx, {
    kind: ledger.kind,
    reference: row.transaction_id,
    postings: [
      { book: { accountId: row.account_id, book: ledger.from }, amount: -row.amount },
      { book: INSTITUTION_BOOK.centralBank, amount: row.amount },
    ],
  });
  return repo.updateState(tx, row.id, { status: TX_STATUS.completed, payment_status: 'settled', stage: 3, completed_at: settledAt }, ctx.clock.now());
}

/** pending -> central bank, settled, pix.refund.completed with the totals of rule 6. */
async function settleRefund(tx: Sql, ctx: TxDeps, row: OwnedTransaction, settledAt: Date): Promise<OwnedTransaction> {
  const settled = await bookReturnSettled(tx, ctx, row, settledAt, { kind: 'refund_settle', from: 'pending' });
  const original = (await repo.findById(tx, row.original_id!))!;
  const totals = await repo.refundTotals(tx, original.id);
  await emitFor(tx, 'pix.refund.completed', settled, {
    ...refundBody(settled, original),
    ...refundTotalsBody(original.amount, totals.executed, settled.amount),
    completed_at: isoZ(settledAt),
  });
  // A return reaching a final state: the API Pix webhook of the Pix's key, if any, is told.
  await noticeForPix(tx, original.id);
  return settled;
}

type Of<K extends RailNotification['kind']> = Extract<RailNotification, { kind: K }>;

/** The return of this end-to-end id if it is of `kind`, locked after its account's books; else null. */
export async function lockReturn(tx: Sql, endToEndId: string, kind: string): Promise<OwnedTransaction | null> {
  const found = await repo.findByEndToEndId(tx, endToEndId);
  if (!found || found.kind !== kind) return null;
  await lockAccount(tx, found.account_id);
  return repo.lockTransaction(tx, found.id);
}

async function lockRefund(tx: Sql, ctx: TxDeps, endToEndId: string): Promise<OwnedTransaction | null> {
  const row = await lockReturn(tx, endToEndId, 'refund');
  if (!row) ctx.log.warn({ end_to_end_id: endToEndId }, 'rail notification for an unknown refund ignored');
  return row;
}

export async function onReturnSettled(tx: Sql, ctx: TxDeps, n: Of<'return.settled'>): Promise<void> {
  const row = await lockRefund(tx, ctx, n.endToEndId);
  if (!row || row.stage === 3) return;
  await settleRefund(tx, ctx, row, n.settledAt);
}

/** pending -> available, failed, pix.refund.failed with the rail's reason_code. */
export async function onReturnRejected(tx: Sql, ctx: TxDeps, n: Of<'return.rejected'>): Promise<void> {
  const row = await lockRefund(tx, ctx, n.endToEndId);
  if (!row || row.stage === 3) return;
  const now = ctx.clock.now();
  await movePending(tx, 'release', { kind: 'refund_reverse', reference: row.transaction_id, accountId: row.account_id, amount: row.amount, now });
  const failed = await repo.updateState(
    tx,
    row.id,
    { status: TX_STATUS.failed, payment_status: 'failed', stage: 3, reason_code: n.reasonCode, reason: n.reason, failed_at: now },
    now,
  );
  const original = (await repo.findById(tx, row.original_id!))!;
  const totals = await repo.refundTotals(tx, original.id);
  await emitFor(tx, 'pix.refund.failed', failed, {
    ...refundBody(failed, original),
    ...refundTotalsBody(original.amount, totals.executed, failed.amount),
    reason_code: n.reasonCode,
    failure_reason: n.reason,
    failed_at: now.toISOString(),
  });
  await noticeForPix(tx, original.id);
}

/** GET /pix/refund/:id: a refund of the merchant (voluntary or MED) by transaction_id, end-to-end id or internal id. */
export async function getRefund(ctx: PixDeps, merchantId: number, id: string) {
  const row = await repo.findForMerchant(ctx.db, merchantId, id);
  if (!row || (row.kind !== 'refund' && row.kind !== 'med_refund')) throw new DomainError('not_found', { message: 'Refund not found' });
  const original = (await repo.findById(ctx.db, row.original_id!))!;
  const totals = await repo.refundTotals(ctx.db, original.id);
  return {
    worked: true,
    id: row.id,
    ...refundBody(row, original),
    status: row.status === TX_STATUS.completed ? 'settled' : row.status === TX_STATUS.pending ? 'accepted' : 'failed',
    ...refundTotalsBody(original.amount, totals.executed, row.amount),
    reason_code: row.reason_code,
    failure_reason: row.reason,
    // A MED refund (executed by the MED flow) names its infraction.
    infraction_id: row.infraction_id,
    completed_at: isoZ(row.completed_at),
    updated_at: isoZ(row.updated_at),
  };
}
