/**
 * The audit at the end of a chaos run, straight in SQL on the run's own PostgreSQL and on the
 * receiver's records. Each finding is an anomaly with a check name and a detail; a clean run has none.
 * What each check means is in docs/chaos.md ("What it audits"). The checks live in audit/, grouped
 * by what they audit: the ledger, what the client was told, the outbox, webhook delivery, the rail,
 * operator writes and limits, and the balance model.
 */
import { acknowledgedOnce, chargePayAnswers, refusedButExecuted } from './audit/acknowledged.js';
import { balanceModel } from './audit/balanceModel.js';
import { eventsMatchState } from './audit/events.js';
import { ledgerBalances, ledgerWithoutRecord, netByReference, recordMoney } from './audit/ledger.js';
import { limitWindows, operatorAuditRows } from './audit/operator.js';
import { railVsPixgate } from './audit/rail.js';
import { loadRecords, type Anomaly, type AuditInput } from './audit/types.js';
import { deliveriesReachReceiver, deliveryOrder, everyEventAnswered, sameChangeTwice } from './audit/webhooks.js';

export type { AccountView, Anomaly, AuditInput } from './audit/types.js';
export { chargePayAnswers, refusedButExecuted } from './audit/acknowledged.js';
export { balanceModel } from './audit/balanceModel.js';
export { ledgerWithoutRecord } from './audit/ledger.js';
export { limitWindows, operatorAuditRows } from './audit/operator.js';
export { railVsPixgate } from './audit/rail.js';
export { deliveryOrder, EVENT_RANK, redeliveryExcused } from './audit/webhooks.js';

export async function audit(input: AuditInput): Promise<{ anomalies: Anomaly[]; figures: Record<string, number> }> {
  const anomalies: Anomaly[] = [];
  const add = (check: string, detail: string) => anomalies.push({ check, detail });
  const q = async <T = any>(text: string, params: unknown[] = []): Promise<T[]> => (await input.query(text, params)) as T[];
  const figures: Record<string, number> = {};

  // 1-2. The ledger sums to zero; every book matches its entries; nothing left pending.
  await ledgerBalances(q, add);
  // 3. Each acknowledged operation exists exactly once; no operation made two records.
  const records = await loadRecords(q);
  const { rows, byMarker } = records;
  await acknowledgedOnce(q, input.ops, records, add, figures);
  // 4. Money of each record: its ledger transactions' net effect on the account's books matches its state.
  const { net, netAll } = await netByReference(q);
  recordMoney(rows, net, netAll, add);
  // 5. Every state change has exactly one event in the outbox, and no event lacks its state.
  const { events, infractions } = await eventsMatchState(q, input.ops, rows, add, figures);
  // 6. Every event reached the receiver; no unexpected duplicates.
  const { deliveries, receiptsById } = await deliveriesReachReceiver(q, input, events, add, figures);

  // 7. Checks of issue 24: what the audit above could not see.
  await railVsPixgate(q, rows, add, figures);
  await ledgerWithoutRecord(q, add, figures);
  refusedButExecuted(input.ops, byMarker, net, add, figures);
  chargePayAnswers(input.ops, rows, byMarker, add, figures);
  deliveryOrder(events, deliveries, input.receipts, add, figures);
  await operatorAuditRows(q, input.ops, rows, infractions, add, figures, input.accounts?.map((a) => a.accountId));
  await limitWindows(q, add, figures);
  if (input.accounts) await balanceModel(q, input.ops, input.receipts, input.accounts, add, figures);
  everyEventAnswered(events, deliveries, receiptsById, add);
  sameChangeTwice(deliveries, receiptsById, add);
  return { anomalies, figures };
}
