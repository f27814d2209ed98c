import type { Sql } from '../../src/db/db.js';
import type { MerchantFixture } from './client.js';
import { outbox, sandbox, txRow, waitFor } from './pix.js';
import type { TestServer } from './server.js';

/** A PIX received by the merchant's account through the sandbox: `{transaction_id, end_to_end_id, amount}`. */
export async function received(s: TestServer, m: MerchantFixture, cents: number, payer: Record<string, string> = {}) {
  const res = await sandbox(s, 'POST', '/pix/inbound', { account_id: m.accountId, amount: cents, ...payer });
  if (res.status !== 201) throw new Error(`inbound: ${JSON.stringify(res.body)}`);
  return res.body as { transaction_id: string; end_to_end_id: string; amount: number };
}

/** POST /api/sandbox/infractions. */
export function reportInfraction(s: TestServer, body: Record<string, unknown>) {
  return sandbox(s, 'POST', '/infractions', body);
}

/** POST /api/sandbox/infractions/:id/resolve. */
export function resolveInfraction(s: TestServer, id: string, decision: string) {
  return sandbox(s, 'POST', `/infractions/${id}/resolve`, { decision });
}

/** Events of an infraction (its outbox subject), oldest first. */
export async function medEvents(sql: Sql, id: string) {
  return outbox(sql, id);
}

/** Ledger entries of one reference: [kind, book code, amount]. */
export async function ledgerOf(sql: Sql, reference: string): Promise<[string, string, number][]> {
  const rows = await sql.query<{ kind: string; code: string; amount: number }>(
    `SELECT lt.kind, la.code, e.amount FROM ledger_transactions lt JOIN ledger_entries e ON e.ledger_transaction_id = lt.id
       JOIN ledger_accounts la ON la.id = e.ledger_account_id WHERE lt.reference = $1 ORDER BY e.id`,
    [reference],
  );
  return rows.map((r) => [r.kind, r.code, r.amount]);
}

/** Waits until a MED refund (or any record) is final. */
export async function finalRecord(s: TestServer, transactionId: string) {
  return waitFor(() => txRow(s.ctx.db, transactionId), (r) => r.stage === 3);
}
