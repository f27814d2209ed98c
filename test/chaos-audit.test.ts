import { afterAll, describe, expect, it } from 'vitest';
import { audit } from '../bench/chaos/audit.js';
import type { Op } from '../bench/chaos/workload.js';
import { BACKENDS, openTestDatabase, type TestDatabase } from './helpers/db.js';
import { validCnpj } from './helpers/fixtures.js';
import { startTestServer, TEST_ADMIN_TOKEN } from './helpers/server.js';

/**
 * The audit of the fault-injection suite (bench/chaos/audit.ts) must be able to fail: on a clean
 * database it finds nothing; on a database with a drifted book, a duplicated event, an event about
 * nothing, one operation credited twice, an acknowledged record that does not exist and forged
 * webhook receipts it names each of them.
 */
const op = (fields: Partial<Op> & Pick<Op, 'id' | 'kind'>): Op => ({ merchant: 0, accountId: 0, path: '/x', body: {}, sends: 1, answers: [], retryable: false, ...fields });

describe.each(BACKENDS)('chaos audit on %s', (backend) => {
  let database: TestDatabase;
  afterAll(() => database?.close());

  it('finds nothing on a clean run and names every planted defect', async () => {
    database = await openTestDatabase(backend);
    const query = (text: string, params?: unknown[]) => database.db.query(text, params);
    const server = await startTestServer({ database });
    const m = await server.admin('POST', '/merchants', { name: 'Audit', document: validCnpj() });
    await server.admin('POST', `/accounts/${m.body.account_id}/deposits`, { amount: 100_000 });
    const inbound = async (url: string) => {
      const res = await fetch(`${url}/api/sandbox/pix/inbound`, {
        method: 'POST',
        headers: { authorization: `Bearer ${TEST_ADMIN_TOKEN}`, 'content-type': 'application/json' },
        body: JSON.stringify({ account_id: m.body.account_id, amount: 5000, description: 'chaos-2' }),
      });
      expect(res.status).toBe(201);
      return (await res.json()) as { transaction_id: string; amount: number };
    };
    const first = await inbound(server.url);
    await server.close();

    // No webhook is registered here, so events are not fanned out to one: that check aside, clean.
    const acked = op({ id: 'chaos-2', kind: 'inbound', body: { amount: 5000 }, acked: { at: 0, status: 201, body: first } });
    const clean = await audit({ query, ops: [acked], receipts: [], faultTimes: [], webhookIds: [] });
    expect(clean.anomalies.filter((a) => a.check !== 'event_not_fanned_out')).toEqual([]);

    const again = await startTestServer({ database });
    await inbound(again.url); // a second record carrying the same operation's marker
    await again.close();
    await query(`UPDATE ledger_accounts SET balance = balance + 100 WHERE account_id = $1 AND book = 'available'`, [m.body.account_id]);
    for (let i = 0; i < 2; i++) {
      await query(`INSERT INTO outbox_events (event, merchant_id, account_id, subject, payload) VALUES ('pix.payout.confirmed', $1, $2, 'PIXOUTGHOST', '{}')`, [m.body.merchant_id, m.body.account_id]);
    }
    const missing = op({ id: 'chaos-9', kind: 'cash_out', body: { amount: 100 }, acked: { at: 0, status: 200, body: { transaction_id: 'PIXOUTNOPE' } } });
    const forged = { deliveryId: '00000000-0000-4000-8000-000000000000', attempt: 1, event: 'pix.payout.confirmed', webhookKey: '1', body: '{}', signatureOk: false, at: 0, answered: 200 };
    const found = await audit({ query, ops: [acked, missing], receipts: [forged], faultTimes: [], webhookIds: [] });
    const checks = new Set(found.anomalies.map((a) => a.check));
    for (const check of ['book_drift', 'duplicate_event', 'event_without_state', 'duplicate_order', 'acknowledged_missing', 'bad_signature', 'unknown_delivery']) {
      expect(checks, `${check} in ${JSON.stringify(found.anomalies, null, 1)}`).toContain(check);
    }
  }, 60_000);
});
