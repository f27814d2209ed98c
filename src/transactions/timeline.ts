import type { Sql } from '../db/db.js';
import { DomainError } from '../errors/catalog.js';
import { isoZ } from '../lib/clock.js';
import type { RailNotification } from '../rail/rail.js';

/**
 * A transaction's timeline (docs/portal.md, "Transaction timeline"): everything pixgate recorded
 * about one record of an account, in time order, in one read — the API request that created it
 * (with its Idempotency-Key), the record's own steps, its ledger postings, the rail's messages, the
 * events written about it and every webhook attempt of those events, and any MED case or refund.
 *
 * A read model: no HTTP and no writes. The merchant portal shows it (src/portal/pages/timeline.ts)
 * and the operator console may reuse it. It reads other domains' tables (the idempotency store,
 * the ledger, the outbox, webhook deliveries, MED) read-only, by the ids that link them to the
 * record: the key's `resource_id`, the ledger's `reference`, the outbox's `subject`, the MED case's
 * `original_id`, a refund's `original_id`.
 */

export type TimelineEntry =
  | { kind: 'request'; at: string; method: string; path: string; idempotency_key: string; response_status: number | null; portal_form: boolean }
  | { kind: 'record'; at: string; step: 'created' | 'completed' | 'failed' | 'held'; status: string; reason_code: string | null; reason: string | null }
  | { kind: 'ledger'; at: string; ledger_transaction_id: number; ledger_kind: string; reference: string; postings: { book: string; own: boolean; amount: number }[] }
  | { kind: 'rail'; at: string; message: string; detail: Record<string, unknown> }
  | { kind: 'event'; at: string; event: string; event_id: string }
  | {
      kind: 'webhook_attempt';
      at: string;
      event: string;
      url: string;
      delivery_id: string;
      attempt: number;
      status_code: number | null;
      error: string | null;
      duration_ms: number;
    }
  | { kind: 'med'; at: string; step: 'opened' | 'defense_submitted' | 'resolved'; infraction_id: string; status: string; amount: number; decision: string | null }
  | { kind: 'refund'; at: string; transaction_id: string; refund_kind: string; amount: number; status: number };

/** A message of the rail about a payment (the simulator keeps them; a rail adapter may). */
export interface RailMessage {
  at: Date;
  kind: string;
  payload: Record<string, unknown>;
}

export interface TimelineDeps {
  db: Sql;
  /**
   * The rail's own log of its messages about these end-to-end ids, for a rail that keeps one;
   * without it, the rail inbox (what pixgate applied, by the notification ids `<kind>:<subject>`).
   */
  railMessages?: ((endToEndIds: readonly string[]) => Promise<RailMessage[]>) | undefined;
}

export interface Timeline {
  transaction_id: string;
  end_to_end_id: string | null;
  kind: string;
  entries: TimelineEntry[];
}

/** The most rows of each kind a timeline reads (a bound: one record has a handful of each). */
const PER_KIND = 200;

interface RecordRow {
  id: string;
  transaction_id: string;
  account_id: number;
  kind: string;
  status: number;
  end_to_end_id: string | null;
  created_at: Date;
  completed_at: Date | null;
  failed_at: Date | null;
  held_at: Date | null;
  reason_code: string | null;
  reason: string | null;
  original_id: string | null;
}

const STATUS = ['', 'completed', 'pending', 'rejected', 'failed'];

/** The rail's notifications about a payment (their subject its end-to-end id) and about an infraction (its id). */
const BY_PAYMENT = ['payment.accepted', 'payment.held', 'payment.settled', 'payment.rejected', 'inbound.payment', 'return.settled', 'return.rejected'] as const satisfies readonly RailNotification['kind'][];
const BY_INFRACTION = ['infraction.reported', 'infraction.resolved'] as const satisfies readonly RailNotification['kind'][];

/** The timeline of the record `id` (transaction id or uuid) of `accountId`; not_found otherwise. */
export async function transactionTimeline(deps: TimelineDeps, accountId: number, id: string): Promise<Timeline> {
  const { db } = deps;
  if (id.length > 256) throw new DomainError('not_found', { message: 'Transaction not found' });
  const uuid = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i.test(id) ? id.toLowerCase() : null;
  const [t] = await db.query<RecordRow>(
    `SELECT id, transaction_id, account_id, kind, status, end_to_end_id, created_at, completed_at, failed_at, held_at, reason_code, reason, original_id
       FROM transactions WHERE account_id = $1 AND (transaction_id = $2 OR id = $3::uuid)`,
    [accountId, id, uuid],
  );
  if (!t) throw new DomainError('not_found', { message: 'Transaction not found' });
  const entries: TimelineEntry[] = [];

  // The record's own steps.
  entries.push({ kind: 'record', at: isoZ(t.created_at)!, step: 'created', status: STATUS[t.status] ?? '', reason_code: null, reason: null });
  if (t.held_at) entries.push({ kind: 'record', at: isoZ(t.held_at)!, step: 'held', status: STATUS[t.status] ?? '', reason_code: null, reason: null });
  if (t.completed_at) entries.push({ kind: 'record', at: isoZ(t.completed_at)!, step: 'completed', status: STATUS[t.status] ?? '', reason_code: null, reason: null });
  if (t.failed_at) entries.push({ kind: 'record', at: isoZ(t.failed_at)!, step: 'failed', status: STATUS[t.status] ?? '', reason_code: t.reason_code, reason: t.reason });

  // The API request (or portal form) whose Idempotency-Key is bound to this record.
  const requests = await db.query<{ method: string; path: string; key: string; response_status: number | null; created_at: Date }>(
    `SELECT method, path, key, response_status, created_at FROM idempotency_keys WHERE resource_id = $1 OR resource_id = $2 ORDER BY id LIMIT ${PER_KIND}`,
    [t.id, t.transaction_id],
  );
  for (const r of requests) {
    entries.push({ kind: 'request', at: isoZ(r.created_at)!, method: r.method, path: r.path, idempotency_key: r.key, response_status: r.response_status, portal_form: r.path.startsWith('/portal/') });
  }

  // Refunds, returns and MED refunds of this record; MED cases about it.
  const refunds = await db.query<{ id: string; transaction_id: string; kind: string; amount: number; status: number; end_to_end_id: string | null; created_at: Date }>(
    `SELECT id, transaction_id, kind, amount, status, end_to_end_id, created_at FROM transactions WHERE original_id = $1 AND account_id = $2 ORDER BY created_at LIMIT ${PER_KIND}`,
    [t.id, accountId],
  );
  for (const r of refunds) entries.push({ kind: 'refund', at: isoZ(r.created_at)!, transaction_id: r.transaction_id, refund_kind: r.kind, amount: Number(r.amount), status: r.status });
  const cases = await db.query<{ id: string; status: string; amount: number; decision: string | null; created_at: Date; defense_submitted_at: Date | null; resolved_at: Date | null }>(
    `SELECT id, status, amount, decision, created_at, defense_submitted_at, resolved_at FROM med_infractions WHERE original_id = $1 AND account_id = $2 ORDER BY created_at LIMIT ${PER_KIND}`,
    [t.id, accountId],
  );
  for (const c of cases) {
    const base = { kind: 'med' as const, infraction_id: c.id, status: c.status, amount: Number(c.amount), decision: c.decision };
    entries.push({ ...base, at: isoZ(c.created_at)!, step: 'opened' });
    if (c.defense_submitted_at) entries.push({ ...base, at: isoZ(c.defense_submitted_at)!, step: 'defense_submitted' });
    if (c.resolved_at) entries.push({ ...base, at: isoZ(c.resolved_at)!, step: 'resolved' });
  }

  // Ledger postings: the record's, its refunds' and its MED cases' (their `reference`).
  const references = [t.transaction_id, ...refunds.map((r) => r.transaction_id), ...cases.map((c) => c.id)];
  const postings = await db.query<{ ledger_transaction_id: number; kind: string; reference: string; created_at: Date; book: string; account_id: number | null; amount: number }>(
    `SELECT lt.id AS ledger_transaction_id, lt.kind, lt.reference, lt.created_at, la.book, la.account_id, le.amount
       FROM ledger_transactions lt JOIN ledger_entries le ON le.ledger_transaction_id = lt.id JOIN ledger_accounts la ON la.id = le.ledger_account_id
      WHERE lt.reference = ANY($1::text[])
      ORDER BY lt.id, le.id LIMIT ${PER_KIND * 4}`,
    [references],
  );
  const byLedger = new Map<number, Extract<TimelineEntry, { kind: 'ledger' }>>();
  for (const p of postings) {
    let e = byLedger.get(p.ledger_transaction_id);
    if (!e) {
      e = { kind: 'ledger', at: isoZ(p.created_at)!, ledger_transaction_id: Number(p.ledger_transaction_id), ledger_kind: p.kind, reference: p.reference, postings: [] };
      byLedger.set(p.ledger_transaction_id, e);
      entries.push(e);
    }
    // Another merchant's account (the other side of a TEF) is named only as such.
    const own = p.account_id !== null && Number(p.account_id) === accountId;
    e.postings.push({ book: p.account_id === null ? 'institution' : own ? p.book : 'other_account', own, amount: Number(p.amount) });
  }

  // The rail's messages pixgate applied about the payment, its returns and its MED cases (its rail
  // inbox, by notification id: `<kind>:<subject>`), or the rail's own log when it keeps one; and the
  // messages it refused to apply.
  const e2es = [t.end_to_end_id, ...refunds.map((r) => r.end_to_end_id)].filter((x): x is string => x !== null);
  if (deps.railMessages && e2es.length) {
    for (const m of (await deps.railMessages(e2es)).slice(0, PER_KIND)) entries.push({ kind: 'rail', at: isoZ(m.at)!, message: m.kind, detail: m.payload });
  } else if (e2es.length) {
    const ids = [
      ...e2es.flatMap((e) => BY_PAYMENT.map((k) => `${k}:${e}`)),
      ...refunds.filter((r) => r.end_to_end_id).map((r) => `payment.returned:${r.end_to_end_id}`),
      ...cases.flatMap((c) => BY_INFRACTION.map((k) => `${k}:${c.id}`)),
    ];
    const applied = await db.query<{ notification_id: string; kind: string; processed_at: Date }>(
      // One row per notification (rows migrated into the day partitions may be recorded under two days).
      'SELECT DISTINCT ON (notification_id) notification_id, kind, processed_at FROM rail_inbox WHERE notification_id = ANY($1::text[]) ORDER BY notification_id, processed_at',
      [ids],
    );
    for (const r of applied) entries.push({ kind: 'rail', at: isoZ(r.processed_at)!, message: r.kind, detail: { notification_id: r.notification_id } });
  }
  if (e2es.length) {
    const refusals = await db.query<{ kind: string; end_to_end_id: string; amount: number; reason_code: string; reason: string; refused_at: Date }>(
      `SELECT kind, end_to_end_id, amount, reason_code, reason, refused_at FROM rail_refusals WHERE end_to_end_id = ANY($1::text[]) LIMIT ${PER_KIND}`,
      [e2es],
    );
    for (const r of refusals) {
      entries.push({ kind: 'rail', at: isoZ(r.refused_at)!, message: `${r.kind} refused`, detail: { end_to_end_id: r.end_to_end_id, amount: Number(r.amount), reason_code: r.reason_code, reason: r.reason } });
    }
  }

  // Events written about the record (and its refunds), and every webhook attempt of each.
  const subjects = [t.transaction_id, ...refunds.map((r) => r.transaction_id)];
  const events = await db.query<{ id: number; event: string; event_id: string; created_at: Date }>(
    `SELECT o.id, o.event, o.event_id, o.created_at FROM outbox_events o JOIN accounts a ON a.merchant_id = o.merchant_id
      WHERE a.id = $1 AND o.subject = ANY($2::text[]) ORDER BY o.id LIMIT ${PER_KIND}`,
    [accountId, subjects],
  );
  for (const e of events) entries.push({ kind: 'event', at: isoZ(e.created_at)!, event: e.event, event_id: e.event_id });
  if (events.length) {
    const attempts = await db.query<{ delivery_id: string; event: string; url: string; attempt: number; started_at: Date; status_code: number | null; error: string | null; duration_ms: number }>(
      `SELECT d.id AS delivery_id, d.event, w.url, a.attempt, a.started_at, a.status_code, a.error, a.duration_ms
         FROM webhook_deliveries d JOIN webhooks w ON w.id = d.webhook_id
         JOIN webhook_attempts a ON a.delivery_id = d.id
        WHERE d.outbox_id = ANY($1::bigint[]) AND d.event_created_at = ANY($2::timestamptz[])
        ORDER BY a.started_at LIMIT ${PER_KIND}`,
      [events.map((e) => e.id), events.map((e) => e.created_at)],
    );
    for (const a of attempts) {
      entries.push({ kind: 'webhook_attempt', at: isoZ(a.started_at)!, event: a.event, url: a.url, delivery_id: a.delivery_id, attempt: a.attempt, status_code: a.status_code, error: a.error, duration_ms: a.duration_ms });
    }
  }

  // In time order; at the same instant, in the order of the flow.
  const ORDER: TimelineEntry['kind'][] = ['request', 'record', 'ledger', 'rail', 'refund', 'med', 'event', 'webhook_attempt'];
  entries.sort((a, b) => a.at.localeCompare(b.at) || ORDER.indexOf(a.kind) - ORDER.indexOf(b.kind));
  return { transaction_id: t.transaction_id, end_to_end_id: t.end_to_end_id, kind: t.kind, entries };
}
