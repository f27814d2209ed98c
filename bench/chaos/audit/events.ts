/** Checks of the outbox: every state change has exactly one event, and no event lacks its state. */
import type { Op } from '../workload.js';
import type { Add, Figures, Q, TxRow } from './types.js';

/** Events that may legitimately be written more than once for one subject (partial returns). */
export const REPEATABLE = new Set(['pix.payout.returned', 'pix.payout.return.failed']);

export interface OutboxEvent {
  id: string;
  event: string;
  subject: string;
  payload: any;
  account_id: string | null;
}

export interface Infraction {
  id: string;
  status: string;
  refund_status: string;
  decision: string | null;
}

/** Checks that `subject` has `want` (or a range of) events `event`; `why` names the state that wants them. */
type Expect = (subject: string, event: string, want: number | [number, number], why: string) => void;

/** Every state change has exactly one event in the outbox, and no event lacks its state. Returns the events and infractions read. */
export async function eventsMatchState(q: Q, ops: Op[], rows: TxRow[], add: Add, figures: Figures): Promise<{ events: OutboxEvent[]; infractions: Infraction[] }> {
  const events = await q<OutboxEvent>('SELECT id::text, event, subject, payload, account_id::text FROM outbox_events ORDER BY id');
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
  const known = new Set<string>();
  recordEvents(rows, events, expect, known);
  const infractions = await q<Infraction>('SELECT id::text, status, refund_status, decision FROM med_infractions');
  infractionAnswers(ops, infractions, add);
  infractionEvents(infractions, expect, known, add);
  for (const subject of bySubject.keys()) if (!known.has(subject)) add('event_without_state', `events for unknown subject ${subject}: ${[...bySubject.get(subject)!.keys()].join(', ')}`);
  return { events, infractions };
}

/** The events each record's state calls for (life cycles in docs/pix.md, docs/tef.md); adds each record's subject to `known`. */
function recordEvents(rows: TxRow[], events: OutboxEvent[], expect: Expect, known: Set<string>): void {
  // Deposits write an (internal) event where the server has one: then every deposit has exactly one.
  const depositEvents = events.some((e) => e.event === 'account.deposit.completed');
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
        expect(s, 'pix.payout.failed', r.resumable === true ? 0 : 1, `${why}, resumable ${r.resumable}`);
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
}

/** A MED infraction the operator was told was opened exists; one told resolved has that decision. */
function infractionAnswers(ops: Op[], infractions: Infraction[], add: Add): void {
  const infractionById = new Map(infractions.map((i) => [i.id, i]));
  for (const op of ops) {
    if (op.kind === 'med_open' && op.acked) {
      if (!infractionById.has(op.acked.body?.id)) add('acknowledged_missing', `${op.id}: infraction ${op.acked.body?.id} answered ${op.acked.status} is not in med_infractions`);
    }
    if (op.kind === 'med_resolve' && op.acked) {
      const id = op.path.split('/')[2]!;
      const i = infractionById.get(id);
      if (!i || i.decision !== op.body.decision) add('acknowledged_mismatch', `${op.id}: resolve ${id} as ${String(op.body.decision)} answered ${op.acked.status}, infraction is ${i ? `${i.status}/${i.decision}` : 'missing'}`);
    }
  }
}

/** The events each infraction's state calls for (docs/med.md); adds each infraction to `known`. */
function infractionEvents(infractions: Infraction[], expect: Expect, known: Set<string>, add: Add): void {
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
}
