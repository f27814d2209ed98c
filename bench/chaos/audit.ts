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
  /** Ids of the receiver's webhooks (one per merchant). */
  webhookIds: string[];
  /** Events the receiver's webhooks subscribe to (every event that fires); others (internal events) are not delivered. */
  subscribed?: string[];
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
  const rows = await q<{ transaction_id: string; kind: string; account_id: string; amount: string; fee_amount: string; external_id: string | null; description: string; end_to_end_id: string | null; status: number; payment_status: string | null; stage: number; metadata: any }>(
    `SELECT transaction_id, kind, account_id::text, amount::text, fee_amount::text, external_id, description, end_to_end_id, status, payment_status, stage, metadata
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
    if (r.kind === 'cash_out') want = r.payment_status === 'settled' ? -(amount + fee) : r.payment_status === 'rejected' || r.payment_status === 'failed' ? 0n : undefined;
    else if (r.kind === 'refund' || r.kind === 'med_refund') want = r.status === 1 ? -amount : r.status === 4 ? 0n : undefined;
    else if (r.kind === 'pix_in') want = amount - fee;
    else if (r.kind === 'deposit') want = amount;
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
      const excused = input.faultTimes.some((t) => t >= firstOk.at - 2000 && t <= later.at);
      if (excused) expectedRedeliveries++;
      else {
        unexpected++;
        add('unexpected_duplicate', `delivery ${id} (${firstOk.event}) received again (attempt ${later.attempt}) ${later.at - firstOk.at} ms after a 2xx answer, with no fault in between`);
      }
    }
  }
  figures.redeliveries_after_fault = expectedRedeliveries;
  figures.unexpected_duplicates = unexpected;
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
