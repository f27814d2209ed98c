import type { Sql } from '../../db/db.js';
import type { IdempotencyBinding } from '../../lib/idempotencyKey.js';
import { OverloadedError } from '../../lib/batcher.js';
import { addMoney } from '../../lib/money.js';
import type { DirectoryEntry } from '../../rail/rail.js';
import type { CashOutCommand } from '../cashOutCommand.js';
import type { OwnedTransaction } from '../repository.js';

/** The cash-out's request, answer and batch types and bounds (src/pix/cashOut.ts is the entry). */

export interface CashOutCaller {
  merchantId: number;
  accountId: number;
}

/** Records the HTTP answer in the operation's final transaction (idempotency). */
export type RecordAnswer = (tx: Sql, statusCode: number, body: CashOutResponse) => Promise<void>;

/** The request's Idempotency-Key: bound to the record in step 1, resumed on a retry. */
export type CashOutKey = Pick<IdempotencyBinding, 'resumes' | 'bind' | 'claim' | 'prepare'> & { record: RecordAnswer };

export interface CashOutResponse {
  worked: boolean;
  final: boolean;
  transaction_id: string;
  end_to_end_id: string;
  external_id: string | null;
  amount: number;
  fee_amount: number;
  net_amount: number;
  status: string;
  detail: string;
}

export interface CashOutAnswer {
  statusCode: number;
  body: CashOutResponse;
}

const DETAIL: Record<string, string> = {
  accepted: 'Cash-out accepted for processing; the outcome follows as pix.payout.confirmed or pix.payout.failed',
  queued: 'Cash-out queued by a protection rule; it is reprocessed automatically',
  settled: 'Cash-out settled',
  rejected: 'Cash-out rejected by the central bank',
  returned: 'Cash-out settled and returned by the receiver',
  failed: 'Cash-out failed',
};

/** The cash-out response of a record as it stands (spec table "Cash-out response"). */
export function cashOutAnswer(row: OwnedTransaction): CashOutAnswer {
  const status =
    row.stage < 3 ? (row.payment_status === 'queued' ? 'queued' : 'accepted') : row.payment_status === 'returned' ? 'settled' : (row.payment_status ?? 'failed');
  return {
    statusCode: status === 'queued' ? 202 : 200,
    body: {
      worked: true,
      final: row.stage === 3,
      transaction_id: row.transaction_id,
      end_to_end_id: row.end_to_end_id!,
      external_id: row.external_id,
      amount: row.amount,
      fee_amount: row.fee_amount,
      net_amount: addMoney(row.amount, row.fee_amount),
      status,
      detail: DETAIL[status] ?? DETAIL.failed!,
    },
  };
}

// ---- step 1 in batches: concurrent cash-outs share one transaction ----

/**
 * Most cash-outs a batch takes (one transaction, one lock of each account's books). A batch of 64
 * writes 64 records and 128 ledger entries in one statement — a few milliseconds — while keeping
 * the locks short for other processes and the answer of the first request close.
 */
export const CASH_OUT_BATCH_MAX = 64;
/**
 * Under load, a reserve batch that follows another waits this long for more cash-outs
 * (`BatcherOptions.lingerMs`): measured with WEB_CONCURRENCY=2 on 2 cores, batches of 7 became
 * 11 and throughput rose about a fifth (docs/decisions.md). A lone cash-out never waits.
 */
export const CASH_OUT_BATCH_LINGER_MS = 2;

export interface ReserveRequest {
  caller: CashOutCaller;
  cmd: CashOutCommand;
  key: CashOutKey;
  destination: DirectoryEntry;
}

export type Settled = { row: OwnedTransaction } | { existingId: string } | { sameAs: OwnedTransaction };
/** A batch's answer for an item: settled, or `later` when its account's books were busy (WaitLanes). */
export type Reserved = Settled | { later: Promise<Settled> };

/**
 * Most cash-outs waiting for a reserve batch in this process (`BatcherOptions.maxQueued`), and as
 * many for their step 3: past it a request is answered 503 with Retry-After at once.
 */
export const CASH_OUT_QUEUE_MAX = 16 * CASH_OUT_BATCH_MAX;
/** Accounts whose books were busy that may have cash-outs waiting for them at once (WaitLanes). */
export const WAIT_LANES_MAX = 64;
/** Of those, how many wait for their books at once (each holds a database connection meanwhile). */
export const WAIT_LANES_RUNNING = 4;
/** Cash-outs that may wait behind one account's busy books (besides those already waiting). */
export const WAIT_LANE_MAX = CASH_OUT_BATCH_MAX;

/**
 * How a batch takes its accounts' books: `skip` — never waiting long for one account: the
 * one-statement writes wait at most RESERVE_LOCK_WAIT_MS (a batch of another process holds them a
 * few milliseconds) and then take only those free (SKIP LOCKED), the transaction under the locks
 * takes only those free; the items of an account held elsewhere (a long MED transaction) go to its
 * WaitLane, so that one busy account never holds up the others' cash-outs; `wait` — waiting for
 * them, up to the lock timeout (a WaitLane's batch: one account).
 */
export type LockMode = 'skip' | 'wait';

/** The answer to a cash-out whose account's books stayed busy past the lock timeout, or whose wait queue is full. */
export const booksBusy = () => new OverloadedError("the account's balance is held by another operation; retry shortly", 1);
