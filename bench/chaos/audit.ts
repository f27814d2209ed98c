/**
 * The audit at the end of a chaos run, straight in SQL on the run's own PostgreSQL and on the
 * receiver's records. Each finding is an anomaly with a check name and a detail; a clean run has none.
 * What each check means is in docs/chaos.md ("What it audits").
 */
import type { Receipt } from './receiver.js';
import type { Op } from './workload.js';

export interface Anomaly {
  check: string;
  detail: string;
}

/** Events that may legitimately be written more than once for one subject (partial returns). */
const REPEATABLE = new Set(['pix.payout.returned', 'pix.payout.return.failed']);

/** Stable JSON (sorted keys) to compare a received body with the outbox payload. */
function stable(v: unknown): string {
  if (Array.isArray(v)) return `[${v.map(stable).join(',')}]`;
  if (v && typeof v === 'object') return `{${Object.keys(v).sort().map((k) => `${JSON.stringify(k)}:${stable((v as Record<string, unknown>)[k])}`).join(',')}}`;
  return JSON.stringify(v);
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

/**
 * Whether a delivery received again at `laterAt` after a 2xx answer at `firstAt` is explained by a
 * fault: one happened between (from 2 s before the answer: the sender's record of it may have been
 * in flight), or the database was failing over at some moment between — the sender could then
 * record the answer only after its lease had ended and another sender had taken the delivery.
 */
export function redeliveryExcused(firstAt: number, laterAt: number, faultTimes: readonly number[], faultWindows: ReadonlyArray<readonly [number, number]>): boolean {
  return faultTimes.some((t) => t >= firstAt - 2000 && t <= laterAt) || faultWindows.some(([start, end]) => end >= firstAt - 2000 && start <= laterAt);
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

export async function audit(input: AuditInput): Promise<{ anomalies: Anomaly[]; figures: Record<string, number> }> {
  const anomalies: Anomaly[] = [];
  const add = (check: string, detail: string) => anomalies.push({ check, detail });
  const q = async <T = any>(text: string, params: unknown[] = []): Promise<T[]> => (await input.query(text, params)) as T[];
  const figures: Record<string, number> = {};

  // 1. The ledger sums to zero, overall and per ledger transaction.
  const total = (await q<{ total: string }>('SELECT COALESCE(sum(amount), 0)::text AS total FROM ledger_entries'))[0]!.total;
  if (total !== '0') add('ledger_sum', `all entries sum to ${total}`);
  const viewTotal = (await q<{ total: string }>('SELECT COALESCE(sum(balance), 0)::text AS total FROM ledger_balances'))[0]!.total;
  if (viewTotal !== '0') add('ledger_sum', `balances sum to ${viewTotal}`);
  for (const r of await q('SELECT ledger_transaction_id, sum(amount)::text AS s FROM ledger_entries GROUP BY 1 HAVING sum(amount) <> 0 LIMIT 20')) {
    add('ledger_unbalanced_transaction', `ledger transaction ${r.ledger_transaction_id} sums to ${r.s}`);
  }
  // 2. Every book's running balance equals the sum of its entries; nothing left pending.
  for (const r of await q(
    `SELECT la.code, la.balance::text AS balance, COALESCE(sum(e.amount), 0)::text AS entries FROM ledger_accounts la
       LEFT JOIN ledger_entries e ON e.ledger_account_id = la.id WHERE la.tracks_balance GROUP BY la.id HAVING la.balance <> COALESCE(sum(e.amount), 0)`,
  )) {
    add('book_drift', `${r.code}: balance ${r.balance}, entries ${r.entries}`);
  }
  for (const r of await q(`SELECT code, balance::text AS balance FROM ledger_accounts WHERE book = 'pending' AND balance <> 0`)) {
    add('pending_after_drain', `${r.code} still holds ${r.balance}`);
  }

  // 3. Each acknowledged operation exists exactly once; no operation made two records.
  const rows = await q<{ id?: string; original_id?: string | null; transaction_id: string; kind: string; account_id: string; amount: string; fee_amount: string; external_id: string | null; description: string; end_to_end_id: string | null; status: number; payment_status: string | null; stage: number; metadata: any }>(
    `SELECT id::text, original_id::text, transaction_id, kind, account_id::text, amount::text, fee_amount::text, external_id, description, end_to_end_id, status, payment_status, stage, metadata
       FROM transactions`,
  );
  const byTid = new Map(rows.map((r) => [r.transaction_id, r]));
  const byE2e = new Map(rows.filter((r) => r.end_to_end_id).map((r) => [r.end_to_end_id!, r]));
  const byMarker = new Map<string, typeof rows>();
  for (const r of rows) {
    if (!/^chaos-\d+$/.test(r.description)) continue;
    const list = byMarker.get(r.description) ?? [];
    list.push(r);
    byMarker.set(r.description, list);
  }
  let checkedAcks = 0;
  for (const op of input.ops) {
    const mine = byMarker.get(op.id) ?? [];
    const ownKinds = op.kind === 'cash_out' ? ['cash_out'] : op.kind === 'tef' ? ['tef_out'] : op.kind === 'deposit' ? ['deposit'] : op.kind === 'refund' ? ['refund'] : op.kind === 'charge' ? ['charge'] : op.kind === 'inbound' ? ['pix_in'] : [];
    const made = mine.filter((r) => ownKinds.includes(r.kind));
    if (made.length > 1) {
      add('duplicate_order', `${op.id} (${op.kind}, key ${op.idempotencyKey ?? '-'}, external_id ${op.externalId ?? '-'}, ${op.sends} sends) made ${made.length} records: ${made.map((r) => `${r.transaction_id} ${r.payment_status ?? r.status}`).join(', ')}`);
    }
    if (!op.acked || ownKinds.length === 0) continue;
    checkedAcks++;
    const tid = op.acked.body?.transaction_id as string | undefined;
    const row = tid ? byTid.get(tid) : undefined;
    if (!row) {
      add('acknowledged_missing', `${op.id} (${op.kind}) answered ${op.acked.status} with transaction_id ${tid} which is not in transactions`);
      continue;
    }
    if (made.length === 1 && made[0]!.transaction_id !== tid) add('acknowledged_mismatch', `${op.id} answered ${tid} but its record is ${made[0]!.transaction_id}`);
    if (made.length === 0 && op.kind !== 'inbound') add('acknowledged_mismatch', `${op.id} answered ${tid} but no record carries its description`);
    if (op.kind === 'cash_out' || op.kind === 'tef' || op.kind === 'deposit' || op.kind === 'refund' || op.kind === 'charge' || op.kind === 'inbound') {
      const cents = Number(op.body.amount);
      if (Number(row.amount) !== cents * 100) add('acknowledged_mismatch', `${op.id}: sent ${cents} cents, record ${tid} has ${row.amount} base units`);
    }
    if (op.externalId && row.external_id !== op.externalId) add('acknowledged_mismatch', `${op.id}: external_id ${op.externalId} but record has ${row.external_id}`);
    if (op.acked.body?.end_to_end_id && byE2e.get(op.acked.body.end_to_end_id)?.transaction_id !== row.transaction_id) {
      add('acknowledged_mismatch', `${op.id}: end_to_end_id ${op.acked.body.end_to_end_id} is not the record's`);
    }
    if (op.replay) {
      if (op.replay.status < 200 || op.replay.status >= 300 || op.replay.transactionId !== tid) {
        add('replay_mismatch', `${op.id} (key ${op.idempotencyKey ?? '-'}, external_id ${op.externalId ?? '-'}): first answer ${tid}, identical resend after the run answered ${op.replay.status} ${op.replay.transactionId ?? op.replay.text}`);
      }
    }
  }
  figures.acknowledged_checked = checkedAcks;
  for (const r of await q(`SELECT account_id, external_id, count(*)::int AS n FROM transactions WHERE external_id IS NOT NULL GROUP BY 1, 2 HAVING count(*) > 1`)) {
    add('duplicate_external_id', `account ${r.account_id} external_id ${r.external_id}: ${r.n} records`);
  }
  // One record per idempotency key sent (from the client's log): markers of one key's operation.
  const keys = new Map<string, string[]>();
  for (const op of input.ops) if (op.idempotencyKey) keys.set(`${op.merchant}:${op.path}:${op.idempotencyKey}`, [...(keys.get(`${op.merchant}:${op.path}:${op.idempotencyKey}`) ?? []), op.id]);
  for (const [k, ids] of keys) if (ids.length > 1) add('client_log', `key ${k} was used by ${ids.join(', ')} (harness bug)`);

  // 4. Money of each record: its ledger transactions' net effect on the account's books matches its state.
  // Net effect of each ledger reference on each account's books, and on all accounts together.
  const net = new Map<string, bigint>();
  const netAll = new Map<string, bigint>();
  for (const r of await q<{ reference: string; account_id: string; s: string }>(
    `SELECT lt.reference, la.account_id::text, sum(e.amount)::text AS s FROM ledger_transactions lt JOIN ledger_entries e ON e.ledger_transaction_id = lt.id
       JOIN ledger_accounts la ON la.id = e.ledger_account_id WHERE la.account_id IS NOT NULL AND lt.reference IS NOT NULL GROUP BY 1, 2`,
  )) {
    net.set(`${r.reference}|${r.account_id}`, BigInt(r.s));
    netAll.set(r.reference, (netAll.get(r.reference) ?? 0n) + BigInt(r.s));
  }
  for (const r of rows) {
    const got = net.get(`${r.transaction_id}|${r.account_id}`) ?? 0n;
    const amount = BigInt(r.amount);
    const fee = BigInt(r.fee_amount);
    let want: bigint | undefined;
    if (r.kind === 'cash_out') want = r.payment_status === 'settled' || r.payment_status === 'returned' ? -(amount + fee) : r.payment_status === 'rejected' || r.payment_status === 'failed' ? 0n : undefined;
    else if (r.kind === 'refund' || r.kind === 'med_refund') want = r.status === 1 ? -amount : r.status === 4 ? 0n : undefined;
    else if (r.kind === 'pix_in') want = amount - fee;
    else if (r.kind === 'deposit') want = amount;
    else if (r.kind === 'payout_return') want = amount;
    else if (r.kind === 'charge') want = r.status === 1 ? amount - fee : 0n;
    else if (r.kind === 'tef_out') {
      // One ledger transaction moves the amount from the source to the destination: 0 in total.
      want = r.status === 1 ? -amount : 0n;
      const all = netAll.get(r.transaction_id) ?? 0n;
      if (all !== 0n) add('money_mismatch', `tef ${r.transaction_id}: its ledger transaction moves ${all} across merchant books (expected 0)`);
    }
    if (want === undefined) {
      if (['cash_out', 'refund', 'med_refund'].includes(r.kind)) add('not_final_after_drain', `${r.kind} ${r.transaction_id} is ${r.payment_status ?? r.status} at stage ${r.stage}`);
      continue;
    }
    if (got !== want) add('money_mismatch', `${r.kind} ${r.transaction_id} (${r.payment_status ?? `status ${r.status}`}): moved ${got} on the account's books, expected ${want}`);
  }

  // 5. Every state change has exactly one event in the outbox, and no event lacks its state.
  const events = await q<{ id: string; event: string; subject: string; payload: any; account_id: string | null }>('SELECT id::text, event, subject, payload, account_id::text FROM outbox_events ORDER BY id');
  figures.outbox_events = events.length;
  const bySubject = new Map<string, Map<string, number>>();
  for (const e of events) {
    const m = bySubject.get(e.subject) ?? new Map<string, number>();
    m.set(e.event, (m.get(e.event) ?? 0) + 1);
    bySubject.set(e.subject, m);
  }
  for (const [subject, m] of bySubject) for (const [event, n] of m) if (n > 1 && !REPEATABLE.has(event)) add('duplicate_event', `${event} written ${n} times for ${subject}`);
  const count = (subject: string, event: string) => bySubject.get(subject)?.get(event) ?? 0;
  const expect = (subject: string, event: string, want: number | [number, number], why: string) => {
    const n = count(subject, event);
    const [lo, hi] = Array.isArray(want) ? want : [want, want];
    if (n < lo || n > hi) add('event_vs_state', `${subject} (${why}): ${n} × ${event}, expected ${lo === hi ? lo : `${lo}..${hi}`}`);
  };
  // Deposits write an (internal) event where the server has one: then every deposit has exactly one.
  const depositEvents = events.some((e) => e.event === 'account.deposit.completed');
  const known = new Set<string>();
  for (const r of rows) {
    known.add(r.transaction_id);
    const s = r.transaction_id;
    if (r.kind === 'cash_out') {
      const st = r.payment_status;
      const why = `cash_out ${st}`;
      if (st === 'settled') {
        expect(s, 'pix.payout.processing', 1, why);
        expect(s, 'pix.payout.confirmed', 1, why);
        expect(s, 'pix.payout.failed', 0, why);
      } else if (st === 'rejected') {
        expect(s, 'pix.payout.processing', 1, why);
        expect(s, 'pix.payout.failed', 1, why);
        expect(s, 'pix.payout.confirmed', 0, why);
      } else if (st === 'failed') {
        // A provider timeout answered to the client (resumable) writes no event; the recovery worker's does.
        expect(s, 'pix.payout.failed', r.metadata?.resumable === true ? 0 : 1, `${why}, resumable ${r.metadata?.resumable}`);
        expect(s, 'pix.payout.confirmed', 0, why);
      }
      expect(s, 'pix.payout.queued', [0, 1], why);
    } else if (r.kind === 'tef_out') {
      expect(s, 'tef.transfer.sent', r.status === 1 ? 1 : 0, `tef status ${r.status}`);
      expect(s, 'tef.transfer.failed', r.status === 1 ? 0 : 1, `tef status ${r.status}`);
    } else if (r.kind === 'deposit') {
      expect(s, 'account.deposit.completed', depositEvents ? 1 : 0, 'deposit');
    } else if (r.kind === 'tef_in') {
      expect(s, 'tef.transfer.received', 1, 'tef_in');
    } else if (r.kind === 'refund') {
      expect(s, 'pix.refund.completed', r.status === 1 ? 1 : 0, `refund status ${r.status}`);
      expect(s, 'pix.refund.failed', r.status === 4 ? 1 : 0, `refund status ${r.status}`);
    } else if (r.kind === 'pix_in') {
      expect(s, 'pix.charge.paid', 1, 'pix_in');
    } else if (r.kind === 'charge') {
      expect(s, 'pix.charge.created', 1, 'charge');
      expect(s, 'pix.charge.paid', r.status === 1 ? 1 : 0, `charge status ${r.status}`);
    }
  }
  const infractions = await q<{ id: string; status: string; refund_status: string; decision: string | null }>('SELECT id::text, status, refund_status, decision FROM med_infractions');
  const infractionById = new Map(infractions.map((i) => [i.id, i]));
  for (const op of input.ops) {
    if (op.kind === 'med_open' && op.acked) {
      if (!infractionById.has(op.acked.body?.id)) add('acknowledged_missing', `${op.id}: infraction ${op.acked.body?.id} answered ${op.acked.status} is not in med_infractions`);
    }
    if (op.kind === 'med_resolve' && op.acked) {
      const id = op.path.split('/')[2]!;
      const i = infractionById.get(id);
      if (!i || i.decision !== op.body.decision) add('acknowledged_mismatch', `${op.id}: resolve ${id} as ${String(op.body.decision)} answered ${op.acked.status}, infraction is ${i ? `${i.status}/${i.decision}` : 'missing'}`);
    }
  }
  for (const i of infractions) {
    known.add(i.id);
    const why = `infraction ${i.status}/${i.refund_status}`;
    expect(i.id, 'pix.infraction.created', 1, why);
    expect(i.id, 'pix.refund.requested', 1, why);
    expect(i.id, 'pix.infraction.resolved', i.status === 'CLOSED' || i.status === 'CANCELLED' ? 1 : 0, why);
    expect(i.id, 'pix.refund.completed', i.refund_status === 'settled' || i.refund_status === 'released' ? 1 : 0, why);
    expect(i.id, 'pix.refund.failed', i.refund_status === 'failed' ? 1 : 0, why);
    if (i.refund_status === 'processing') add('not_final_after_drain', `infraction ${i.id} refund still processing`);
  }
  for (const subject of bySubject.keys()) if (!known.has(subject)) add('event_without_state', `events for unknown subject ${subject}: ${[...bySubject.get(subject)!.keys()].join(', ')}`);

  // 6. Every event reached the receiver; no unexpected duplicates.
  const deliveries = await q<{ id: string; outbox_id: string; status: string; webhook_id: string; event: string; attempts: number }>(
    `SELECT id::text, outbox_id::text, status, webhook_id::text, event, attempts FROM webhook_deliveries`,
  );
  figures.webhook_deliveries = deliveries.length;
  const deliveryById = new Map(deliveries.map((d) => [d.id, d]));
  const deliveriesByOutbox = new Map<string, number>();
  for (const d of deliveries) if (input.webhookIds.includes(d.webhook_id)) deliveriesByOutbox.set(d.outbox_id, (deliveriesByOutbox.get(d.outbox_id) ?? 0) + 1);
  const delivered = (event: string) => !input.subscribed || input.subscribed.includes(event);
  for (const e of events) {
    if (!delivered(e.event)) continue;
    const n = deliveriesByOutbox.get(e.id) ?? 0;
    if (n !== 1) add('event_not_fanned_out', `outbox ${e.id} ${e.event} ${e.subject}: ${n} deliveries to the receiver's webhook`);
  }
  for (const d of deliveries) if (d.status !== 'delivered') add('delivery_not_delivered', `delivery ${d.id} (${d.event}) is ${d.status} after ${d.attempts} attempts`);
  const payloadByOutbox = new Map(events.map((e) => [e.id, e.payload]));
  const receiptsById = new Map<string, Receipt[]>();
  for (const r of input.receipts) receiptsById.set(r.deliveryId, [...(receiptsById.get(r.deliveryId) ?? []), r]);
  figures.receipts = input.receipts.length;
  figures.receipts_answered_503 = input.receipts.filter((r) => r.answered !== 200).length;
  let expectedRedeliveries = 0;
  let unexpected = 0;
  for (const r of input.receipts) if (!r.signatureOk) add('bad_signature', `delivery ${r.deliveryId} attempt ${r.attempt}: X-Service-Signature does not verify`);
  for (const [id, list] of receiptsById) {
    const d = deliveryById.get(id);
    if (!d) {
      add('unknown_delivery', `receiver got delivery id ${id} (${list[0]!.event}) that is not in webhook_deliveries`);
      continue;
    }
    const payload = payloadByOutbox.get(d.outbox_id);
    for (const r of list) {
      let parsed: unknown;
      try {
        parsed = JSON.parse(r.body);
      } catch {
        parsed = r.body;
      }
      if (stable(parsed) !== stable(payload)) add('body_mismatch', `delivery ${id} attempt ${r.attempt}: body differs from outbox ${d.outbox_id}`);
    }
    // A delivery received again after the receiver answered 2xx is expected only when a fault
    // (SIGKILL of the server, PostgreSQL stopped) may have lost the sender's record of that answer.
    const firstOk = list.find((r) => r.answered === 200);
    if (!firstOk) continue;
    for (const later of list.filter((r) => r.at > firstOk.at)) {
      const excused = redeliveryExcused(firstOk.at, later.at, input.faultTimes, input.faultWindows ?? []);
      if (excused) expectedRedeliveries++;
      else {
        unexpected++;
        add('unexpected_duplicate', `delivery ${id} (${firstOk.event}) received again (attempt ${later.attempt}) ${later.at - firstOk.at} ms after a 2xx answer, with no fault in between`);
      }
    }
  }
  figures.redeliveries_after_fault = expectedRedeliveries;
  figures.unexpected_duplicates = unexpected;

  // 7. Checks of issue 24: what the audit above could not see.
  await railVsPixgate(q, rows, add, figures);
  await ledgerWithoutRecord(q, add, figures);
  refusedButExecuted(input.ops, byMarker, net, add, figures);
  chargePayAnswers(input.ops, rows, byMarker, add, figures);
  deliveryOrder(events, deliveries, input.receipts, add, figures);
  await operatorAuditRows(q, input.ops, rows, infractions, add, figures, input.accounts?.map((a) => a.accountId));
  await limitWindows(q, add, figures);
  if (input.accounts) await balanceModel(q, input.ops, input.receipts, input.accounts, add, figures);
  const deliveriesOf = new Map<string, typeof deliveries>();
  for (const d of deliveries) deliveriesOf.set(d.outbox_id, [...(deliveriesOf.get(d.outbox_id) ?? []), d]);
  for (const e of events) {
    const ds = deliveriesOf.get(e.id) ?? [];
    for (const d of ds) if (!(receiptsById.get(d.id) ?? []).some((r) => r.answered === 200)) add('event_not_received', `outbox ${e.id} ${e.event} ${e.subject} (delivery ${d.id}, ${d.status}) never answered 2xx by the receiver`);
  }
  // The same state change announced under two delivery ids (two events): by (event, subject, status).
  const seen = new Map<string, string>();
  for (const [id, list] of receiptsById) {
    const body = (() => {
      try {
        return JSON.parse(list[0]!.body);
      } catch {
        return {};
      }
    })();
    const d = deliveryById.get(id);
    if (!d || REPEATABLE.has(list[0]!.event)) continue;
    const k = `${d.webhook_id}|${list[0]!.event}|${body.transaction_id ?? ''}|${body.infraction_id ?? ''}|${body.status}`;
    if (seen.has(k) && list[0]!.event.startsWith('pix.payout')) add('unexpected_duplicate', `two deliveries (${seen.get(k)}, ${id}) announce ${k}`);
    seen.set(k, id);
  }
  return { anomalies, figures };
}

type Add = (check: string, detail: string) => void;
type Q = <T = any>(text: string, params?: unknown[]) => Promise<T[]>;
interface TxRow {
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
  metadata: any;
}

/** A record the rail must have paid out: a settled cash-out (also when returned later), a settled refund or MED return. */
function settledOutbound(r: TxRow): boolean | undefined {
  if (r.kind === 'cash_out') return r.payment_status === 'settled' || r.payment_status === 'returned' ? true : r.payment_status === 'rejected' || r.payment_status === 'failed' ? false : undefined;
  if (r.kind === 'refund' || r.kind === 'med_refund') return r.status === 1 ? true : r.status === 3 || r.status === 4 ? false : undefined;
  return undefined;
}

/**
 * pixgate against the rail's own records (the simulator's `sim_payments`, which stand for the
 * central bank's books): one rail payment per outbound record, nothing settled in pixgate that the
 * rail did not settle, nothing settled by the rail that pixgate did not debit, no rail payment
 * pixgate has no record of; inbound: every credit has a settled rail payment and every settled rail
 * payment to this institution was credited; returns of payouts only of settled payouts, never more
 * than the amount.
 */
export async function railVsPixgate(q: Q, rows: TxRow[], add: Add, figures: Record<string, number>): Promise<void> {
  const rail = await q<{ end_to_end_id: string; kind: string; direction: string; transaction_id: string | null; amount: string; returned_amount: string; status: string; original_end_to_end_id: string | null }>(
    `SELECT end_to_end_id, kind, direction, transaction_id, amount::text, returned_amount::text, status, original_end_to_end_id FROM sim_payments`,
  );
  figures.rail_payments = rail.length;
  const byTid = new Map(rows.map((r) => [r.transaction_id, r]));
  const byE2e = new Map(rows.filter((r) => r.end_to_end_id).map((r) => [r.end_to_end_id!, r]));
  const railByE2e = new Map(rail.map((p) => [p.end_to_end_id, p]));
  const outboundOf = new Map<string, typeof rail>();
  for (const p of rail) {
    if (p.direction !== 'outbound') continue;
    const r = (p.transaction_id ? byTid.get(p.transaction_id) : undefined) ?? byE2e.get(p.end_to_end_id);
    if (!r) {
      add('rail_orphan_payment', `the rail has ${p.kind} ${p.end_to_end_id} (${p.status}, ${p.amount}) for transaction ${p.transaction_id ?? '-'}, which pixgate has no record of`);
      continue;
    }
    outboundOf.set(r.transaction_id, [...(outboundOf.get(r.transaction_id) ?? []), p]);
  }
  let compared = 0;
  for (const r of rows) {
    const settled = settledOutbound(r);
    const paid = outboundOf.get(r.transaction_id) ?? [];
    if (paid.length > 1) add('rail_duplicate_payment', `${r.kind} ${r.transaction_id}: ${paid.length} rail payments (${paid.map((p) => `${p.end_to_end_id} ${p.status}`).join(', ')})`);
    if (settled === undefined) continue;
    compared++;
    const railSettled = paid.filter((p) => p.status === 'settled');
    if (settled && railSettled.length === 0) add('settled_without_rail', `${r.kind} ${r.transaction_id} is settled in pixgate; the rail ${paid.length ? `has it ${paid.map((p) => p.status).join(', ')}` : 'never saw it'}`);
    if (!settled && railSettled.length > 0) add('rail_settled_not_booked', `${r.kind} ${r.transaction_id} is ${r.payment_status ?? `status ${r.status}`} in pixgate but the rail settled ${railSettled.map((p) => p.end_to_end_id).join(', ')}: money left without a debit`);
    for (const p of railSettled) if (BigInt(p.amount) !== BigInt(r.amount)) add('rail_amount_mismatch', `${r.kind} ${r.transaction_id}: record ${r.amount}, rail ${p.end_to_end_id} ${p.amount}`);
  }
  // Returns of payouts: only of a payout settled in pixgate, never more than its amount in all.
  const returned = new Map<string, bigint>();
  const byId = new Map(rows.map((r) => [r.id ?? '', r]));
  for (const r of rows) {
    if (r.kind !== 'payout_return') continue;
    const originalTid = r.metadata?.original_transaction_id as string | undefined;
    const original = (originalTid ? byTid.get(originalTid) : undefined) ?? byId.get(r.original_id ?? '');
    if (!original || (original.payment_status !== 'settled' && original.payment_status !== 'returned')) {
      add('return_of_unsettled', `payout_return ${r.transaction_id} credits a return of ${originalTid ?? '?'}, which is ${original ? original.payment_status : 'missing'} in pixgate`);
      continue;
    }
    returned.set(original.transaction_id, (returned.get(original.transaction_id) ?? 0n) + BigInt(r.amount));
  }
  for (const [tid, sum] of returned) {
    const original = byTid.get(tid)!;
    if (sum > BigInt(original.amount)) add('return_exceeds_amount', `${tid}: returns credited ${sum}, payout ${original.amount}`);
  }
  // Inbound: a credit in pixgate needs a payment (or a return) the rail settled to this institution, and the reverse.
  for (const r of rows) {
    if (r.kind !== 'pix_in' && r.kind !== 'payout_return' && !(r.kind === 'charge' && r.status === 1)) continue;
    compared++;
    const p = r.end_to_end_id ? railByE2e.get(r.end_to_end_id) : undefined;
    if (!p || p.direction !== 'inbound' || p.status !== 'settled') add('credited_without_rail', `${r.kind} ${r.transaction_id} (${r.end_to_end_id ?? 'no end_to_end_id'}) is credited; the rail ${p ? `has it ${p.direction} ${p.status}` : 'never saw it'}`);
    else if (BigInt(p.amount) !== BigInt(r.amount)) add('rail_amount_mismatch', `${r.kind} ${r.transaction_id}: record ${r.amount}, rail ${p.end_to_end_id} ${p.amount}`);
  }
  for (const p of rail) {
    if (p.direction !== 'inbound') continue;
    if (p.status === 'settled' && !byE2e.has(p.end_to_end_id)) add('rail_inbound_not_credited', `the rail settled ${p.end_to_end_id} (${p.amount}) to this institution; no record credits it`);
    if (p.kind === 'return' && p.original_end_to_end_id) {
      const original = railByE2e.get(p.original_end_to_end_id);
      if (!original || original.status !== 'settled') add('return_of_unsettled', `return ${p.end_to_end_id} of ${p.original_end_to_end_id}, which the rail ${original ? `has ${original.status}` : 'never saw'}`);
    }
  }
  for (const p of rail) if (BigInt(p.returned_amount) > BigInt(p.amount)) add('return_exceeds_amount', `${p.end_to_end_id}: returned ${p.returned_amount} of ${p.amount}`);
  figures.rail_compared = compared;
}

/** Every ledger transaction belongs to a record (transaction, infraction or boleto): none moves money on its own. */
export async function ledgerWithoutRecord(q: Q, add: Add, figures: Record<string, number>): Promise<void> {
  const orphans = await q<{ id: string; kind: string; reference: string | null }>(
    `SELECT lt.id::text, lt.kind, lt.reference FROM ledger_transactions lt
      WHERE lt.reference IS NULL
         OR (lt.kind NOT LIKE 'boleto%'
             AND NOT EXISTS (SELECT 1 FROM transactions t WHERE t.transaction_id = lt.reference)
             AND NOT EXISTS (SELECT 1 FROM med_infractions i WHERE i.id::text = lt.reference))
      ORDER BY lt.id LIMIT 50`,
  );
  figures.ledger_transactions_without_record = orphans.length;
  for (const o of orphans) add('ledger_without_record', `ledger transaction ${o.id} (${o.kind}) references ${o.reference ?? 'nothing'}, which is no transaction or infraction`);
}

const OWN_KINDS: Record<string, string[]> = { cash_out: ['cash_out'], tef: ['tef_out'], deposit: ['deposit'], refund: ['refund'], charge: ['charge'], inbound: ['pix_in'] };

/** A record that moved money or is (or will be) carried out: not a refusal. */
function executed(r: TxRow, moved: bigint): boolean {
  if (moved !== 0n) return true;
  if (r.kind === 'charge') return r.status === 1;
  if (r.payment_status) return ['processing', 'queued', 'settled', 'returned'].includes(r.payment_status);
  return r.status === 1 || r.status === 2;
}

/** An operation whose final answer was a 4xx (the client treats it as not done) must have done nothing. */
export function refusedButExecuted(ops: Op[], byMarker: Map<string, TxRow[]>, net: Map<string, bigint>, add: Add, figures: Record<string, number>): void {
  let n = 0;
  for (const op of ops) {
    if (!op.refused || op.refused.status < 400 || op.refused.status >= 500) continue;
    n++;
    const mine = (byMarker.get(op.id) ?? []).filter((r) => (OWN_KINDS[op.kind] ?? []).includes(r.kind));
    for (const r of mine) {
      const moved = net.get(`${r.transaction_id}|${r.account_id}`) ?? 0n;
      if (executed(r, moved)) add('refused_but_executed', `${op.id} (${op.kind}) was answered ${op.refused.status} ${op.refused.text.slice(0, 120)} but ${r.transaction_id} is ${r.payment_status ?? `status ${r.status}`} and moved ${moved}`);
    }
  }
  figures.refusals_checked = n;
}

/**
 * The sandbox's answer to paying a charge: a 2xx names a paid record of the charge's account for
 * the charge's amount; a 4xx leaves the charge unpaid; a charge is paid only by a payment sent.
 */
export function chargePayAnswers(ops: Op[], rows: TxRow[], byMarker: Map<string, TxRow[]>, add: Add, figures: Record<string, number>): void {
  const byTid = new Map(rows.map((r) => [r.transaction_id, r]));
  const paySent = new Set<string>();
  let n = 0;
  for (const op of ops) {
    if (op.kind !== 'charge_pay' || !op.parent) continue;
    paySent.add(op.parent);
    const charge = byTid.get(op.parent);
    if (op.acked) {
      n++;
      const tid = op.acked.body?.transaction_id as string | undefined;
      const r = tid ? byTid.get(tid) : undefined;
      if (!r) add('charge_pay_answer', `${op.id}: paying charge ${op.parent} answered ${op.acked.status} with transaction_id ${tid ?? '-'}, which is not in transactions`);
      else {
        if (Number(r.account_id) !== op.accountId) add('charge_pay_answer', `${op.id}: paying charge ${op.parent} of account ${op.accountId} answered ${tid}, a record of account ${r.account_id}`);
        if (r.kind !== 'charge' && r.kind !== 'pix_in') add('charge_pay_answer', `${op.id}: answered ${tid}, a ${r.kind}`);
        if (charge && BigInt(r.amount) !== BigInt(charge.amount)) add('charge_pay_answer', `${op.id}: charge ${op.parent} of ${charge.amount} answered ${tid} of ${r.amount}`);
      }
      if (!charge || charge.status !== 1) add('charge_pay_answer', `${op.id}: paying charge ${op.parent} answered ${op.acked.status} but the charge is ${charge ? `status ${charge.status}` : 'missing'}`);
    } else if (op.refused && op.refused.status >= 400 && op.refused.status < 500) {
      n++;
      if (charge?.status === 1) add('charge_pay_answer', `${op.id}: paying charge ${op.parent} was refused ${op.refused.status} ${op.refused.text.slice(0, 120)} but the charge is paid`);
    }
  }
  for (const op of ops) {
    if (op.kind !== 'charge' || !op.acked) continue;
    const tid = op.acked.body?.transaction_id as string | undefined;
    const charge = (tid ? byTid.get(tid) : undefined) ?? (byMarker.get(op.id) ?? []).find((r) => r.kind === 'charge');
    if (charge?.status === 1 && !paySent.has(charge.transaction_id)) add('charge_pay_answer', `charge ${charge.transaction_id} (${op.id}) is paid but no payment of it was sent`);
  }
  figures.charge_pay_checked = n;
}

/**
 * Order of each subject's events (docs/webhooks.md, "Order per subject"; life cycles in docs/pix.md
 * and docs/med.md): as written (outbox id order) they never go backwards in their life cycle
 * (EVENT_RANK: a payout queued → processing (→ held) → confirmed or failed → returned; a charge
 * created → paid; an infraction created → refund requested → resolved; events of equal rank may
 * come in either order), and the receiver sees a delivery of a subject
 * only after every earlier delivery of that subject to the same webhook was answered 2xx (or ended
 * failed). Repeats of a delivery already answered (at least once) are not order violations.
 */
export const EVENT_RANK: Record<string, number> = {
  'pix.charge.created': 0,
  'pix.charge.paid': 1,
  'pix.payout.queued': 0,
  'pix.payout.processing': 1,
  'pix.payout.held': 1,
  'pix.payout.confirmed': 2,
  'pix.payout.failed': 2,
  'pix.payout.returned': 3,
  'pix.payout.return.failed': 3,
  'pix.infraction.created': 0,
  'pix.refund.requested': 1,
  'pix.infraction.resolved': 2,
};

export function deliveryOrder(
  events: { id: string; event: string; subject: string }[],
  deliveries: { id: string; outbox_id: string; status: string; webhook_id: string }[],
  receipts: Receipt[],
  add: Add,
  figures: Record<string, number>,
): void {
  const eventById = new Map(events.map((e) => [e.id, e]));
  const lastRank = new Map<string, { rank: number; event: string }>();
  for (const e of [...events].sort((a, b) => Number(a.id) - Number(b.id))) {
    const rank = EVENT_RANK[e.event];
    if (rank === undefined) continue;
    const before = lastRank.get(e.subject);
    if (before && rank < before.rank) add('event_order', `${e.subject}: ${e.event} (outbox ${e.id}) written after ${before.event}`);
    if (!before || rank > before.rank) lastRank.set(e.subject, { rank, event: e.event });
  }
  // Arrival order at the receiver (index in its log), per delivery: first arrival, first 2xx.
  const first = new Map<string, number>();
  const firstOk = new Map<string, number>();
  receipts.forEach((r, i) => {
    if (!first.has(r.deliveryId)) first.set(r.deliveryId, i);
    if (r.answered >= 200 && r.answered < 300 && !firstOk.has(r.deliveryId)) firstOk.set(r.deliveryId, i);
  });
  const chains = new Map<string, { id: string; outbox: number; status: string; event: string }[]>();
  for (const d of deliveries) {
    const e = eventById.get(d.outbox_id);
    if (!e) continue;
    const k = `${d.webhook_id}|${e.subject}`;
    chains.set(k, [...(chains.get(k) ?? []), { id: d.id, outbox: Number(d.outbox_id), status: d.status, event: e.event }]);
  }
  let checked = 0;
  for (const [k, chain] of chains) {
    if (chain.length < 2) continue;
    chain.sort((a, b) => a.outbox - b.outbox);
    for (let i = 1; i < chain.length; i++) {
      const later = chain[i]!;
      const at = first.get(later.id);
      if (at === undefined) continue;
      checked++;
      for (const earlier of chain.slice(0, i)) {
        if (earlier.status === 'failed') continue;
        const ok = firstOk.get(earlier.id);
        if (ok === undefined || ok > at) {
          add('delivery_order', `${k.split('|')[1]}: ${later.event} (delivery ${later.id}) arrived before ${earlier.event} (delivery ${earlier.id}) was ${ok === undefined ? 'ever answered 2xx' : 'answered 2xx'}`);
          break;
        }
      }
    }
  }
  figures.delivery_order_checked = checked;
}

/** Every operator write that took effect has its audit row (operation and row in one transaction), and every acknowledged one a 2xx row. */
export async function operatorAuditRows(
  q: Q,
  ops: Op[],
  rows: TxRow[],
  infractions: { id: string; decision: string | null }[],
  add: Add,
  figures: Record<string, number>,
  workloadAccounts?: readonly number[],
): Promise<void> {
  const audit = await q<{ route: string; status: number; target: Record<string, unknown> }>('SELECT route, status, target FROM admin_audit_log WHERE status BETWEEN 200 AND 299');
  figures.audit_rows = audit.length;
  const named = new Set<string>();
  for (const a of audit) for (const f of ['transaction_id', 'id', 'infraction_id']) if (typeof a.target?.[f] === 'string') named.add(`${a.route.endsWith('/resolve') ? 'resolve' : 'write'}|${a.target[f]}`);
  // Operator operations of the workload that took effect, known from the database.
  const byTid = new Map(rows.map((r) => [r.transaction_id, r]));
  const effects: { what: string; key: string }[] = [];
  // Deposits on the workload's accounts only: the server runs with APP_ENV=local and funds the demo
  // merchant it seeds on its empty database (src/seed.ts) at start-up, through no operator request.
  // Counted, that deposit took an unanswered row of another write, or, in a run with none, was
  // reported as an operator deposit without its row (seed 818498677).
  const ours = workloadAccounts ? new Set(workloadAccounts.map(String)) : undefined;
  for (const r of rows) {
    const operatorDeposit = r.kind === 'deposit' && (!ours || ours.has(String(r.account_id)));
    if (operatorDeposit || (r.kind === 'pix_in' && /^chaos-\d+$/.test(r.description))) effects.push({ what: `${r.kind} ${r.transaction_id}`, key: `write|${r.transaction_id}` });
  }
  for (const op of ops) {
    if (op.kind === 'charge_pay' && op.parent && byTid.get(op.parent)?.status === 1) {
      const tid = op.acked?.body?.transaction_id as string | undefined;
      if (tid) effects.push({ what: `payment of charge ${op.parent}`, key: `write|${tid}` });
    }
  }
  for (const r of rows) {
    if (r.kind !== 'payout_return') continue;
    const original = r.metadata?.original_transaction_id as string | undefined;
    // The answer may name the return (when credited at once) or only the payout (the path's transaction_id).
    effects.push({ what: `payout_return ${r.transaction_id} of ${original ?? '?'}`, key: named.has(`write|${r.transaction_id}`) ? `write|${r.transaction_id}` : `write|${original}` });
  }
  for (const i of infractions) {
    effects.push({ what: `infraction ${i.id} opened`, key: `write|${i.id}` });
    if (i.decision) effects.push({ what: `infraction ${i.id} resolved ${i.decision}`, key: `resolve|${i.id}` });
  }
  // A row whose status is NULL or 5xx: the operation committed with its row, and the process died
  // (or the status update failed) before the answer was recorded, or the answer failed after the
  // commit (a sandbox call whose notification was not applied within its 10 s); and a 2xx row whose
  // answer named no id (a payout return answered before the service had applied it) — such a row
  // does not name what it wrote, so each may stand for one unnamed effect of its kind (never more).
  const loose = await q<{ route: string; status: number | null; target: Record<string, unknown> | null }>(
    'SELECT route, status, target FROM admin_audit_log WHERE status IS NULL OR status >= 500 OR status BETWEEN 200 AND 299',
  );
  const spare = new Map<string, number>();
  let unanswered = 0;
  for (const r of loose) {
    const namesOne = ['transaction_id', 'id', 'infraction_id'].some((f) => typeof r.target?.[f] === 'string');
    // (Only the payout return answers 2xx without naming its effect; any other 2xx row must name it.)
    if (r.status !== null && r.status < 300 && (namesOne || !r.route.endsWith('/return'))) continue;
    if (r.status === null || r.status >= 500) unanswered++;
    const kind = r.route.endsWith('/resolve') ? 'resolve' : 'write';
    spare.set(kind, (spare.get(kind) ?? 0) + 1);
  }
  figures.audit_rows_unanswered = unanswered;
  let missing = 0;
  for (const e of effects) {
    if (named.has(e.key)) continue;
    const kind = e.key.split('|')[0]!;
    const left = spare.get(kind) ?? 0;
    if (left > 0) {
      spare.set(kind, left - 1);
      continue;
    }
    missing++;
    add('audit_row_missing', `${e.what} took effect with no audit row in admin_audit_log (neither a 2xx row naming it nor an unanswered one)`);
  }
  const acked = ops.filter((o) => o.acked && ['deposit', 'inbound', 'charge_pay', 'med_open', 'med_resolve', 'payout_return'].includes(o.kind)).length;
  figures.operator_writes_acknowledged = acked;
  figures.operator_effects_without_audit_row = missing;
  if (audit.length < acked) add('audit_row_missing', `${acked} operator writes acknowledged, ${audit.length} 2xx rows in admin_audit_log`);
}

/** What each account sent in each limit window (cash_out_usage) never exceeds its limit. */
export async function limitWindows(q: Q, add: Add, figures: Record<string, number>): Promise<void> {
  const usage = await q<{ account_id: string; window_kind: string; window_start: Date; amount: string; daily: string; night: string }>(
    `SELECT u.account_id::text, u.window_kind, u.window_start, u.amount::text, a.cash_out_daily_limit_cents::text AS daily, a.cash_out_nighttime_limit_cents::text AS night
       FROM cash_out_usage u JOIN accounts a ON a.id = u.account_id`,
  );
  figures.limit_windows = usage.length;
  for (const u of usage) {
    const limit = BigInt(u.window_kind === 'night' ? u.night : u.daily) * 100n;
    if (BigInt(u.amount) > limit) add('limit_exceeded', `account ${u.account_id} sent ${u.amount} in its ${u.window_kind} window from ${new Date(u.window_start).toISOString()}, limit ${limit}`);
  }
}

/**
 * Each account's money (all its books) against a model built from what the client learned: the
 * opening balance; + each acknowledged deposit, inbound PIX and charge payment (amount − cash-in
 * fee); ± each acknowledged TEF; − each cash-out the webhooks confirmed (amount + fee), refund they
 * said completed, MED return they said completed; 0 for every 4xx refusal and every payout they said
 * failed. Operations whose outcome the client never learned (no final answer, or no final event)
 * widen the tolerance by their possible effect, and only they do.
 */
export async function balanceModel(q: Q, ops: Op[], receipts: Receipt[], accounts: AccountView[], add: Add, figures: Record<string, number>): Promise<void> {
  const model = new Map(accounts.map((a) => [a.accountId, { exact: BigInt(a.opening), lo: 0n, hi: 0n, view: a }]));
  const move = (accountId: number | undefined, amount: bigint, certain: boolean) => {
    const m = accountId === undefined ? undefined : model.get(accountId);
    if (!m) return;
    if (certain) m.exact += amount;
    else if (amount < 0n) m.lo += amount;
    else m.hi += amount;
  };
  // Final events received (de-duplicated by delivery id), per transaction id.
  const outcome = new Map<string, { event: string; amount: bigint }>();
  const medReturns: { key: string; amount: bigint }[] = [];
  const seen = new Set<string>();
  for (const r of receipts) {
    if (!r.signatureOk || seen.has(r.deliveryId)) continue;
    seen.add(r.deliveryId);
    let body: any;
    try {
      body = JSON.parse(r.body);
    } catch {
      continue;
    }
    if (!['pix.payout.confirmed', 'pix.payout.failed', 'pix.refund.completed', 'pix.refund.failed'].includes(r.event) || typeof body?.transaction_id !== 'string') continue;
    outcome.set(body.transaction_id, { event: r.event, amount: BigInt(body.amount ?? 0) + (r.event === 'pix.payout.confirmed' ? BigInt(body.fee_amount ?? 0) : 0n) });
    if (r.event === 'pix.refund.completed' && body.infraction_id) medReturns.push({ key: r.webhookKey, amount: BigInt(body.amount ?? 0) });
  }
  const byKey = new Map(accounts.map((a) => [a.webhookKey, a.accountId]));
  for (const ret of medReturns) move(byKey.get(ret.key), -ret.amount, true);
  const view = new Map(accounts.map((a) => [a.merchant, a]));
  let uncertain = 0;
  for (const op of ops) {
    const a = view.get(op.merchant);
    if (!a) continue;
    const base = BigInt(Number(op.body.amount ?? 0)) * 100n;
    const refused = !!op.refused && op.refused.status >= 400 && op.refused.status < 500;
    if (refused) continue;
    const learned = !!op.acked;
    if (!learned) uncertain++;
    switch (op.kind) {
      case 'deposit':
        move(a.accountId, base, learned);
        break;
      case 'inbound':
        move(a.accountId, base - BigInt(a.cashInFee), learned);
        break;
      case 'charge_pay':
        move(a.accountId, BigInt(op.chargeAmountCents ?? 0) * 100n - BigInt(a.cashInFee), learned);
        break;
      case 'tef':
        move(a.accountId, -base, learned);
        move(op.destinationAccount, base, learned);
        break;
      case 'cash_out':
      case 'refund': {
        const tid = op.acked?.body?.transaction_id as string | undefined;
        const o = tid ? outcome.get(tid) : undefined;
        const full = op.kind === 'cash_out' ? base + BigInt(a.cashOutFee) : base;
        if (o && (o.event === 'pix.payout.confirmed' || o.event === 'pix.refund.completed')) move(a.accountId, -o.amount, true);
        else if (!o || !/failed$/.test(o.event)) {
          if (learned) uncertain++;
          move(a.accountId, -full, false);
        }
        break;
      }
      case 'payout_return': {
        // 201 {returned: true, amount}: credited; 200 {returned: false}: the rail refused it, nothing moves.
        if (op.acked) {
          if (op.acked.body?.returned === true) move(a.accountId, BigInt(op.acked.body.amount ?? base), true);
        } else move(a.accountId, base, false);
        break;
      }
      case 'med_open':
        // A MED return is counted from its completion event above; an infraction whose return's outcome never arrived widens the tolerance.
        break;
    }
  }
  // MED returns that may have happened without their completion event reaching the client.
  for (const op of ops) {
    if (op.kind !== 'med_resolve' || op.body.decision !== 'accepted') continue;
    const open = ops.find((o) => o.kind === 'med_open' && o.acked?.body?.id && op.path.includes(o.acked.body.id));
    if (!open) continue;
    const a = view.get(op.merchant)!;
    const heard = receipts.some((r) => r.event === 'pix.refund.completed' || r.event === 'pix.refund.failed' ? r.body.includes(open.acked!.body.id) : false);
    if (!heard) move(a.accountId, -BigInt(Number(open.body.amount ?? 0)) * 100n, false);
  }
  const books = await q<{ account_id: string; total: string }>('SELECT account_id::text, sum(balance)::text AS total FROM ledger_accounts WHERE account_id IS NOT NULL GROUP BY 1');
  const actual = new Map(books.map((b) => [Number(b.account_id), BigInt(b.total)]));
  for (const [accountId, m] of model) {
    const got = actual.get(accountId) ?? 0n;
    const lo = m.exact + m.lo;
    const hi = m.exact + m.hi;
    if (got < lo || got > hi) add('balance_model', `account ${accountId} holds ${got}; the client's log says ${lo === hi ? String(lo) : `${lo}..${hi}`} (certain ${m.exact}; unresolved −${-m.lo}/+${m.hi}); off by ${got < lo ? got - lo : got - hi}`);
  }
  figures.balance_accounts_checked = model.size;
  figures.balance_ops_uncertain = uncertain;
}
