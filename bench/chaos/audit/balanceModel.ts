/** The balance model: each account's money against what the client learned from answers and webhooks. */
import type { Receipt } from '../receiver.js';
import type { Op } from '../workload.js';
import type { AccountView, Add, Q } from './types.js';

/** Moves `amount` on the model of `accountId`: certainly, or widening its tolerance (down if negative, up if positive). */
type Move = (accountId: number | undefined, amount: bigint, certain: boolean) => void;
/** A final event received for a transaction: its event and the amount it moved (amount, plus the fee for a confirmed payout). */
type Outcome = { event: string; amount: bigint };

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
  const { outcome, medReturns } = finalEvents(receipts);
  const byKey = new Map(accounts.map((a) => [a.webhookKey, a.accountId]));
  for (const ret of medReturns) move(byKey.get(ret.key), -ret.amount, true);
  const view = new Map(accounts.map((a) => [a.merchant, a]));
  const uncertain = modelOps(ops, view, outcome, move);
  unheardMedReturns(ops, receipts, view, move);
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

/** Final events received (de-duplicated by delivery id), per transaction id; and the MED returns they said completed, by webhook key. */
function finalEvents(receipts: Receipt[]): { outcome: Map<string, Outcome>; medReturns: { key: string; amount: bigint }[] } {
  const outcome = new Map<string, Outcome>();
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
  return { outcome, medReturns };
}

/** Moves each operation's effect on the model; returns how many operations' outcome the client never learned. */
function modelOps(ops: Op[], view: Map<number, AccountView>, outcome: Map<string, Outcome>, move: Move): number {
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
  return uncertain;
}

/** MED returns that may have happened without their completion event reaching the client. */
function unheardMedReturns(ops: Op[], receipts: Receipt[], view: Map<number, AccountView>, move: Move): void {
  for (const op of ops) {
    if (op.kind !== 'med_resolve' || op.body.decision !== 'accepted') continue;
    const open = ops.find((o) => o.kind === 'med_open' && o.acked?.body?.id && op.path.includes(o.acked.body.id));
    if (!open) continue;
    const a = view.get(op.merchant)!;
    const heard = receipts.some((r) => r.event === 'pix.refund.completed' || r.event === 'pix.refund.failed' ? r.body.includes(open.acked!.body.id) : false);
    if (!heard) move(a.accountId, -BigInt(Number(open.body.amount ?? 0)) * 100n, false);
  }
}
