/** pixgate against the rail's own records (the simulator's `sim_payments`). */
import type { Add, Q, TxRow } from './types.js';

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
    const originalTid = r.original_transaction_id ?? (r.metadata?.original_transaction_id as string | undefined);
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
