/** Checks of the ledger: it sums to zero, its books match their entries, and each record moved what its state says. */
import type { Add, Q, TxRow } from './types.js';

/** The ledger sums to zero, overall and per ledger transaction; every book's running balance equals the sum of its entries; nothing is left pending. */
export async function ledgerBalances(q: Q, add: Add): Promise<void> {
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
}

/**
 * Net effect of each ledger reference on each account's books (key `reference|account_id`), and on
 * all accounts together (key `reference`).
 */
export async function netByReference(q: Q): Promise<{ net: Map<string, bigint>; netAll: Map<string, bigint> }> {
  const net = new Map<string, bigint>();
  const netAll = new Map<string, bigint>();
  for (const r of await q<{ reference: string; account_id: string; s: string }>(
    `SELECT lt.reference, la.account_id::text, sum(e.amount)::text AS s FROM ledger_transactions lt JOIN ledger_entries e ON e.ledger_transaction_id = lt.id
       JOIN ledger_accounts la ON la.id = e.ledger_account_id WHERE la.account_id IS NOT NULL AND lt.reference IS NOT NULL GROUP BY 1, 2`,
  )) {
    net.set(`${r.reference}|${r.account_id}`, BigInt(r.s));
    netAll.set(r.reference, (netAll.get(r.reference) ?? 0n) + BigInt(r.s));
  }
  return { net, netAll };
}

/** Money of each record: its ledger transactions' net effect on the account's books matches its state. */
export function recordMoney(rows: TxRow[], net: Map<string, bigint>, netAll: Map<string, bigint>, add: Add): void {
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
