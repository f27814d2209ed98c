/** What the audit's checks share: its input, its findings, and the records it reads. */
import type { Receipt } from '../receiver.js';
import type { Op } from '../workload.js';

export interface Anomaly {
  check: string;
  detail: string;
}

export interface AuditInput {
  /** Runs one SQL statement on the run's database and returns its rows. */
  query: (text: string, params?: unknown[]) => Promise<any[]>;
  ops: Op[];
  receipts: Receipt[];
  /** Times of faults after which a webhook result may not have been recorded (kills, PostgreSQL stops). */
  faultTimes: number[];
  /**
   * Faults that last (a failover: from the kill until the cluster is whole again), [start, end] in
   * ms: while one lasts, a sender's result may be recorded only after its lease ended.
   */
  faultWindows?: Array<[number, number]>;
  /** Ids of the receiver's webhooks (one per merchant). */
  webhookIds: string[];
  /** Events the receiver's webhooks subscribe to (every event that fires); others (internal events) are not delivered. */
  subscribed?: string[];
  /** The client's view of each account (opening balance and fees as set up): input of the balance model. Without it the model is skipped. */
  accounts?: AccountView[];
}

export interface AccountView {
  accountId: number;
  /** Index of the merchant in the workload (Op.merchant). */
  merchant: number;
  /** Base units credited before the workload (set-up deposits). */
  opening: number;
  /** Fees as configured at set-up, base units. */
  cashOutFee: number;
  cashInFee: number;
  /** Receiver key of the account's webhook (the merchant id as text). */
  webhookKey: string;
}

/** Records a finding of one check. */
export type Add = (check: string, detail: string) => void;
/** Runs one SQL statement on the run's database and returns its rows. */
export type Q = <T = any>(text: string, params?: unknown[]) => Promise<T[]>;
/** Counters printed with the report (checked items, rows seen). */
export type Figures = Record<string, number>;

/** One row of `transactions` as the audit reads it. */
export interface TxRow {
  id?: string;
  original_id?: string | null;
  transaction_id: string;
  kind: string;
  account_id: string;
  amount: string;
  fee_amount: string;
  external_id: string | null;
  description: string;
  end_to_end_id: string | null;
  status: number;
  payment_status: string | null;
  stage: number;
  /** A cash-out failed on a rail timeout that a repeat may send again (migration 0850). */
  resumable?: boolean;
  /** The transaction_id of the row original_id points at (a refund's or a payout return's original; migration 0860). */
  original_transaction_id?: string | null;
  metadata: any;
}

/** The run's records (every row of `transactions`) and the indexes the checks look them up by. */
export interface Records {
  rows: TxRow[];
  byTid: Map<string, TxRow>;
  byE2e: Map<string, TxRow>;
  /** Records by the workload's marker in their description (`chaos-<n>`: the operation's id). */
  byMarker: Map<string, TxRow[]>;
}

export async function loadRecords(q: Q): Promise<Records> {
  const rows = await q<TxRow>(
    `SELECT id::text, original_id::text, transaction_id, kind, account_id::text, amount::text, fee_amount::text, external_id, description, end_to_end_id, status, payment_status, stage, resumable, metadata,
            (SELECT o.transaction_id FROM transactions o WHERE o.id = t.original_id) AS original_transaction_id
       FROM transactions t`,
  );
  const byTid = new Map(rows.map((r) => [r.transaction_id, r]));
  const byE2e = new Map(rows.filter((r) => r.end_to_end_id).map((r) => [r.end_to_end_id!, r]));
  const byMarker = new Map<string, TxRow[]>();
  for (const r of rows) {
    if (!/^chaos-\d+$/.test(r.description)) continue;
    const list = byMarker.get(r.description) ?? [];
    list.push(r);
    byMarker.set(r.description, list);
  }
  return { rows, byTid, byE2e, byMarker };
}
