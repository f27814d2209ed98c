/** Checks of what the client was told: each acknowledged operation exists once as it was answered; a refusal did nothing. */
import type { Op } from '../workload.js';
import type { Add, Figures, Q, Records, TxRow } from './types.js';

/** Each acknowledged operation exists exactly once, as answered; no operation made two records; no key or external_id names two. */
export async function acknowledgedOnce(q: Q, ops: Op[], { byTid, byE2e, byMarker }: Records, add: Add, figures: Figures): Promise<void> {
  let checkedAcks = 0;
  for (const op of ops) {
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
  for (const op of ops) if (op.idempotencyKey) keys.set(`${op.merchant}:${op.path}:${op.idempotencyKey}`, [...(keys.get(`${op.merchant}:${op.path}:${op.idempotencyKey}`) ?? []), op.id]);
  for (const [k, ids] of keys) if (ids.length > 1) add('client_log', `key ${k} was used by ${ids.join(', ')} (harness bug)`);
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
