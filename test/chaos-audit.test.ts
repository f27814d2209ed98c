import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { audit, balanceModel, chargePayAnswers, deliveryOrder, railVsPixgate, redeliveryExcused, refusedButExecuted } from '../bench/chaos/audit.js';
import { Operator } from '../bench/chaos/client.js';
import { workerDeaths } from '../bench/chaos/harness.js';
import { rawDriverError, Workload, type Op } from '../bench/chaos/workload.js';
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

describe('a webhook redelivery after a 2xx answer', () => {
  it('is excused by a fault from 2 s before the answer to the redelivery, or by a failover lasting over that span, and by nothing else', () => {
    expect(redeliveryExcused(10_000, 15_000, [9_000], [])).toBe(true);
    expect(redeliveryExcused(10_000, 15_000, [7_000], [])).toBe(false);
    expect(redeliveryExcused(10_000, 15_000, [16_000], [])).toBe(false);
    // The HA run: the database failed over from 5 s before the answer until after the redelivery
    // (the answer's record came after the lease ended); no fault instant falls in between.
    expect(redeliveryExcused(10_000, 15_000, [5_000, 30_000], [[5_000, 30_000]])).toBe(true);
    expect(redeliveryExcused(10_000, 15_000, [1_000, 6_000], [[1_000, 6_000]])).toBe(false);
    expect(redeliveryExcused(10_000, 15_000, [20_000, 30_000], [[20_000, 30_000]])).toBe(false);
  });
});

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

/**
 * The checks of issue 24 on a real database (both backends): a clean state passes every one of
 * them; then each planted anomaly is named by its check.
 */
const NEW_CHECKS = ['rail_orphan_payment', 'rail_duplicate_payment', 'settled_without_rail', 'rail_settled_not_booked', 'credited_without_rail', 'rail_inbound_not_credited', 'ledger_without_record', 'refused_but_executed', 'charge_pay_answer', 'event_order', 'delivery_order', 'audit_row_missing', 'limit_exceeded', 'balance_model'];

describe.each(BACKENDS)('chaos audit, checks of issue 24, on %s', (backend) => {
  let database: TestDatabase;
  afterAll(() => database?.close());

  it('passes a clean state, then names the rail, ledger, audit-log, limit and balance anomalies planted', async () => {
    database = await openTestDatabase(backend);
    const query = (text: string, params?: unknown[]) => database.db.query(text, params);
    const server = await startTestServer({ database });
    const m = await server.admin('POST', '/merchants', { name: 'Audit', document: validCnpj() });
    const accountId = m.body.account_id as number;
    expect((await server.admin('POST', `/accounts/${accountId}/deposits`, { amount: 100_000 })).status).toBe(201);
    expect((await server.admin('PATCH', `/accounts/${accountId}`, { cash_in_fee_cents: 5, cash_out_daily_limit_cents: 1000, cash_out_nighttime_limit_cents: 500 })).status).toBe(200);
    const res = await fetch(`${server.url}/api/sandbox/pix/inbound`, {
      method: 'POST',
      headers: { authorization: `Bearer ${TEST_ADMIN_TOKEN}`, 'content-type': 'application/json' },
      body: JSON.stringify({ account_id: accountId, amount: 5000, description: 'chaos-2' }),
    });
    expect(res.status).toBe(201);
    const paid = { body: (await res.json()) as { transaction_id: string; end_to_end_id: string } };
    await server.close();

    const acked = op({ id: 'chaos-2', kind: 'inbound', accountId, body: { amount: 5000 }, acked: { at: 0, status: 201, body: paid.body } });
    const accounts = [{ accountId, merchant: 0, opening: 100_000 * 100, cashOutFee: 0, cashInFee: 500, webhookKey: String(m.body.merchant_id) }];
    const clean = await audit({ query, ops: [acked], receipts: [], faultTimes: [], webhookIds: [], accounts });
    expect(clean.anomalies.filter((a) => NEW_CHECKS.includes(a.check))).toEqual([]);
    expect(clean.figures.rail_compared).toBeGreaterThan(0);

    // The same state seen by a client that thinks it deposited R$ 1 less: the balance model flags it.
    const off = await audit({ query, ops: [acked], receipts: [], faultTimes: [], webhookIds: [], accounts: [{ ...accounts[0]!, opening: 99_999 * 100 }] });
    expect(off.anomalies.map((a) => a.check)).toContain('balance_model');
    // An inbound the client never heard back about widens the tolerance: no finding.
    const unsure = await audit({ query, ops: [{ ...acked, acked: undefined }], receipts: [], faultTimes: [], webhookIds: [], accounts });
    expect(unsure.anomalies.map((a) => a.check)).not.toContain('balance_model');

    const e2e = paid.body.end_to_end_id as string;
    await query(`UPDATE sim_payments SET status = 'rejected' WHERE end_to_end_id = $1`, [e2e]);
    await query(
      `INSERT INTO sim_payments (end_to_end_id, kind, direction, transaction_id, amount, payer_ispb, receiver_ispb, status, created_at)
       VALUES ('E99999999202601010000GHOST0001', 'payment', 'outbound', 'PIXOUTGHOST', 1000, '99999999', '60746948', 'settled', now())`,
    );
    await query(`INSERT INTO ledger_transactions (kind, reference) VALUES ('cash_out_settle', 'PIXOUTNOWHERE')`);
    // Past the limit: what the database's own backstop (migration 0700) refuses, planted with it off.
    await query('ALTER TABLE cash_out_usage DISABLE TRIGGER cash_out_usage_within_limit');
    await query(`INSERT INTO cash_out_usage (account_id, window_kind, window_start, amount) VALUES ($1, 'night', now(), 60000)`, [accountId]);
    await query('ALTER TABLE cash_out_usage ENABLE TRIGGER cash_out_usage_within_limit');
    await query(`DELETE FROM admin_audit_log WHERE target->>'transaction_id' = $1`, [paid.body.transaction_id]);
    const found = await audit({ query, ops: [acked], receipts: [], faultTimes: [], webhookIds: [], accounts });
    const checks = new Set(found.anomalies.map((a) => a.check));
    for (const check of ['credited_without_rail', 'rail_orphan_payment', 'ledger_without_record', 'limit_exceeded', 'audit_row_missing']) {
      expect(checks, `${check} in ${JSON.stringify(found.anomalies, null, 1)}`).toContain(check);
    }
  }, 60_000);

  // The chaos server runs with APP_ENV=local: on its empty database it seeds the demo merchant and
  // deposits its funding (src/seed.ts) with no operator request, so with no audit row. That deposit
  // is no operator effect; it used to be counted as one and to take an "unanswered" row of another
  // write, or, in a run with none (seed 818498677), to be reported as a deposit without its row.
  it('the demo funding seeded at start-up (no operator request) needs no audit row', async () => {
    const db = await openTestDatabase(backend);
    const dataDir = mkdtempSync(join(tmpdir(), 'chaos-audit-seed-'));
    try {
      const query = (text: string, params?: unknown[]) => db.db.query(text, params);
      const server = await startTestServer({ database: db, seed: true, env: { DATA_DIR: dataDir } });
      const m = await server.admin('POST', '/merchants', { name: 'Audit', document: validCnpj() });
      const accountId = m.body.account_id as number;
      expect((await server.admin('POST', `/accounts/${accountId}/deposits`, { amount: 100_000 })).status).toBe(201);
      await server.close();
      const seeded = await query(`SELECT transaction_id FROM transactions WHERE kind = 'deposit' AND description = 'Demo funding'`);
      expect(seeded).toHaveLength(1);
      const accounts = [{ accountId, merchant: 0, opening: 100_000 * 100, cashOutFee: 0, cashInFee: 0, webhookKey: String(m.body.merchant_id) }];
      const result = await audit({ query, ops: [], receipts: [], faultTimes: [], webhookIds: [], accounts });
      expect(result.anomalies.filter((a) => a.check === 'audit_row_missing')).toEqual([]);
      // An operator deposit on the workload's account still needs its row.
      await query(`DELETE FROM admin_audit_log WHERE route LIKE '%/deposits'`);
      const found = await audit({ query, ops: [], receipts: [], faultTimes: [], webhookIds: [], accounts });
      expect(found.anomalies.filter((a) => a.check === 'audit_row_missing').map((a) => a.detail).join('\n')).not.toContain((seeded[0] as { transaction_id: string }).transaction_id);
      expect(found.anomalies.filter((a) => a.check === 'audit_row_missing')).toHaveLength(1);
    } finally {
      await db.close();
      rmSync(dataDir, { recursive: true, force: true });
    }
  }, 60_000);
});

/** The checks that read only the client's log and the receiver's, fed crafted anomalies. */
describe('chaos audit, checks of issue 24, on crafted inputs', () => {
  const collect = () => {
    const found: { check: string; detail: string }[] = [];
    return { found, add: (check: string, detail: string) => found.push({ check, detail }), figures: {} as Record<string, number> };
  };
  const tx = (f: Partial<TxLike> & Pick<TxLike, 'transaction_id' | 'kind'>): TxLike => ({ account_id: '1', amount: '10000', fee_amount: '0', external_id: null, description: '', end_to_end_id: null, status: 1, payment_status: null, stage: 3, metadata: {}, ...f });
  type TxLike = Parameters<typeof refusedButExecuted>[1] extends Map<string, (infer T)[]> ? T : never;

  it('rail vs pixgate: a settlement the rail never made, a payout the rail settled but pixgate failed, two rail payments for one record', async () => {
    const rows = [
      tx({ transaction_id: 'PIXOUT1', kind: 'cash_out', payment_status: 'settled', end_to_end_id: 'E1' }),
      tx({ transaction_id: 'PIXOUT2', kind: 'cash_out', payment_status: 'failed', end_to_end_id: 'E2' }),
      tx({ transaction_id: 'PIXOUT3', kind: 'cash_out', payment_status: 'settled', end_to_end_id: 'E3' }),
    ];
    const rail = [
      { end_to_end_id: 'E1', kind: 'payment', direction: 'outbound', transaction_id: 'PIXOUT1', amount: '10000', returned_amount: '0', status: 'rejected', original_end_to_end_id: null },
      { end_to_end_id: 'E2', kind: 'payment', direction: 'outbound', transaction_id: 'PIXOUT2', amount: '10000', returned_amount: '0', status: 'settled', original_end_to_end_id: null },
      { end_to_end_id: 'E3', kind: 'payment', direction: 'outbound', transaction_id: 'PIXOUT3', amount: '10000', returned_amount: '0', status: 'settled', original_end_to_end_id: null },
      { end_to_end_id: 'E3b', kind: 'payment', direction: 'outbound', transaction_id: null, amount: '10000', returned_amount: '0', status: 'settled', original_end_to_end_id: null },
    ];
    const c = collect();
    await railVsPixgate((async () => rail) as never, rows, c.add, c.figures);
    expect(c.found.map((f) => f.check).sort()).toEqual(['rail_orphan_payment', 'rail_settled_not_booked', 'settled_without_rail']);
    // A second rail payment naming the same record.
    const c2 = collect();
    await railVsPixgate((async () => [rail[2]!, { ...rail[2]!, end_to_end_id: 'E3c' }]) as never, [rows[2]!], c2.add, c2.figures);
    expect(c2.found.map((f) => f.check)).toEqual(['rail_duplicate_payment']);
  });

  it('returns of payouts: of a payout pixgate never settled, beyond its amount; a settled rail return nobody credited', async () => {
    const rows = [
      tx({ transaction_id: 'PIXOUT1', kind: 'cash_out', payment_status: 'failed', end_to_end_id: 'E1' }),
      tx({ transaction_id: 'PIXOUT2', kind: 'cash_out', payment_status: 'settled', end_to_end_id: 'E2', amount: '10000' }),
      tx({ transaction_id: 'RET1', kind: 'payout_return', amount: '500', end_to_end_id: 'D1', metadata: { original_transaction_id: 'PIXOUT1' } }),
      tx({ transaction_id: 'RET2', kind: 'payout_return', amount: '6000', end_to_end_id: 'D2', metadata: { original_transaction_id: 'PIXOUT2' } }),
      tx({ transaction_id: 'RET3', kind: 'payout_return', amount: '6000', end_to_end_id: 'D3', metadata: { original_transaction_id: 'PIXOUT2' } }),
    ];
    const sim = (e2e: string, kind: string, direction: string, status: string, amount: string, original: string | null = null, tid: string | null = null) => ({ end_to_end_id: e2e, kind, direction, transaction_id: tid, amount, returned_amount: '0', status, original_end_to_end_id: original });
    const rail = [
      sim('E1', 'payment', 'outbound', 'rejected', '10000', null, 'PIXOUT1'),
      sim('E2', 'payment', 'outbound', 'settled', '10000', null, 'PIXOUT2'),
      sim('D1', 'return', 'inbound', 'settled', '500', 'E1'),
      sim('D2', 'return', 'inbound', 'settled', '6000', 'E2'),
      sim('D3', 'return', 'inbound', 'settled', '6000', 'E2'),
      sim('D4', 'return', 'inbound', 'settled', '100', 'E2'),
    ];
    const c = collect();
    await railVsPixgate((async () => rail) as never, rows, c.add, c.figures);
    expect(c.found.map((f) => f.check).sort()).toEqual(['rail_inbound_not_credited', 'return_exceeds_amount', 'return_of_unsettled', 'return_of_unsettled']);
  });

  it('rail vs pixgate: a settled payout whose rail payment has another amount', async () => {
    const c = collect();
    const rail = [{ end_to_end_id: 'E1', kind: 'payment', direction: 'outbound', transaction_id: 'PIXOUT1', amount: '9999', returned_amount: '0', status: 'settled', original_end_to_end_id: null }];
    await railVsPixgate((async () => rail) as never, [tx({ transaction_id: 'PIXOUT1', kind: 'cash_out', payment_status: 'settled', end_to_end_id: 'E1' })], c.add, c.figures);
    expect(c.found.map((f) => f.check)).toEqual(['rail_amount_mismatch']);
  });

  it('answers: a 500 and a 503 without Retry-After are noted, a 503 with it is not', async () => {
    const workload = new Workload([], new Operator('http://127.0.0.1:9', 't'), { seed: 1, workers: 0, clientTimeoutMs: 1000, keys: { settle: '', reject: '', queued: '' }, evpKeys: [], idempotentDeposits: false });
    const answer = (status: number, retryAfter?: string) => async () => ({ status, body: { errors: { x: 'y' } }, text: '{"errors":{"x":"y"}}', ...(retryAfter ? { retryAfter } : {}) });
    await workload.execute(op({ id: 'chaos-1', kind: 'inbound' }), answer(500));
    await workload.execute(op({ id: 'chaos-2', kind: 'inbound' }), answer(503));
    await workload.execute(op({ id: 'chaos-3', kind: 'inbound' }), answer(503, '1'));
    expect(workload.notes.map((n) => `${n.op} ${n.check}`)).toEqual(['chaos-1 answer_500', 'chaos-2 answer_503_without_retry_after']);
  });

  it('a cluster worker that died by itself is found in the primary\'s log; the suite\'s SIGKILLs are not', () => {
    const dir = mkdtempSync(join(tmpdir(), 'chaos-audit-'));
    const file = join(dir, 'pixgate.log');
    writeFileSync(file, [JSON.stringify({ msg: 'worker died; starting another', pid: 11, code: null, signal: 'SIGKILL' }), JSON.stringify({ msg: 'worker died; starting another', pid: 12, code: 1, signal: null }), 'not json'].join('\n'));
    expect(workerDeaths(file)).toEqual([{ pid: 12, code: 1, signal: null }]);
    rmSync(dir, { recursive: true, force: true });
  });

  it('answers that pass a driver error through are recognised; the API\'s own refusals are not', () => {
    const answer = (status: number, body: unknown) => ({ status, body, text: JSON.stringify(body) });
    expect(rawDriverError(answer(400, { code: 'ECONNREFUSED', message: 'connect ECONNREFUSED 127.0.0.1:5432' }))).toBe(true);
    expect(rawDriverError(answer(500, { code: '57P01', message: 'terminating connection due to administrator command' }))).toBe(true);
    expect(rawDriverError(answer(422, { worked: false, errors: { insufficient_balance: 'Insufficient balance' }, code: 'insufficient_balance' }))).toBe(false);
    expect(rawDriverError(answer(503, { errors: { service_unavailable: 'Try again later' } }))).toBe(false);
  });

  it('refused but executed: a 422 whose cash-out is processing is flagged; a 422 whose TEF record failed is not', () => {
    const refusedCashOut = op({ id: 'chaos-5', kind: 'cash_out', refused: { status: 422, text: '{"code":"insufficient_balance"}' } });
    const refusedTef = op({ id: 'chaos-6', kind: 'tef', refused: { status: 422, text: '{"code":"insufficient_balance"}' } });
    const byMarker = new Map([
      ['chaos-5', [tx({ transaction_id: 'PIXOUT5', kind: 'cash_out', status: 2, payment_status: 'processing', stage: 1 })]],
      ['chaos-6', [tx({ transaction_id: 'TEF6', kind: 'tef_out', status: 4, payment_status: 'failed' })]],
    ]);
    const c = collect();
    refusedButExecuted([refusedCashOut, refusedTef], byMarker, new Map([['PIXOUT5|1', -10000n]]), c.add, c.figures);
    expect(c.found.map((f) => f.detail)).toEqual([expect.stringContaining('chaos-5')]);
    expect(c.found[0]!.check).toBe('refused_but_executed');
  });

  it('charge_pay answers: a 201 naming another account\'s record, a 4xx on a charge that got paid, a paid charge nobody paid', () => {
    const rows = [tx({ transaction_id: 'CHG1', kind: 'charge', status: 1, account_id: '1' }), tx({ transaction_id: 'PIXIN9', kind: 'pix_in', account_id: '2' }), tx({ transaction_id: 'CHG2', kind: 'charge', status: 1, account_id: '1' }), tx({ transaction_id: 'CHG3', kind: 'charge', status: 1, account_id: '1' })];
    const ops = [
      op({ id: 'chaos-1', kind: 'charge_pay', accountId: 1, parent: 'CHG1', acked: { at: 0, status: 201, body: { transaction_id: 'PIXIN9' } } }),
      op({ id: 'chaos-2', kind: 'charge_pay', accountId: 1, parent: 'CHG2', refused: { status: 422, text: 'no' } }),
      op({ id: 'chaos-3', kind: 'charge', accountId: 1, acked: { at: 0, status: 201, body: { transaction_id: 'CHG3' } } }),
    ];
    const c = collect();
    chargePayAnswers(ops, rows, new Map(), c.add, c.figures);
    expect(c.found.every((f) => f.check === 'charge_pay_answer')).toBe(true);
    const details = c.found.map((f) => f.detail).join('\n');
    expect(details).toContain('a record of account 2');
    expect(details).toContain('refused 422');
    expect(details).toContain('CHG3 (chaos-3) is paid but no payment');
    // Correct answers: nothing.
    const c2 = collect();
    chargePayAnswers([op({ id: 'chaos-1', kind: 'charge_pay', accountId: 1, parent: 'CHG1', acked: { at: 0, status: 201, body: { transaction_id: 'CHG1' } } })], rows.slice(0, 1), new Map(), c2.add, c2.figures);
    expect(c2.found).toEqual([]);
  });

  it('per-subject order: confirmed written before processing, and a later delivery received before the earlier one was answered', () => {
    const events = [
      { id: '1', event: 'pix.payout.confirmed', subject: 'PIXOUT1' },
      { id: '2', event: 'pix.payout.processing', subject: 'PIXOUT1' },
      { id: '3', event: 'pix.payout.processing', subject: 'PIXOUT2' },
      { id: '4', event: 'pix.payout.confirmed', subject: 'PIXOUT2' },
    ];
    const deliveries = [
      { id: 'd3', outbox_id: '3', status: 'delivered', webhook_id: 'w' },
      { id: 'd4', outbox_id: '4', status: 'delivered', webhook_id: 'w' },
    ];
    const receipt = (deliveryId: string, answered: number) => ({ deliveryId, attempt: 1, event: 'x', webhookKey: '1', body: '{}', signatureOk: true, at: 0, answered });
    const c = collect();
    // d3 first answered 503, then d4 arrives (it should have waited), then d3 again.
    deliveryOrder(events, deliveries, [receipt('d3', 503), receipt('d4', 200), receipt('d3', 200)], c.add, c.figures);
    expect(c.found.map((f) => f.check).sort()).toEqual(['delivery_order', 'event_order']);
    const c2 = collect();
    deliveryOrder(events.slice(2), deliveries, [receipt('d3', 503), receipt('d3', 200), receipt('d4', 200), receipt('d3', 200)], c2.add, c2.figures);
    expect(c2.found).toEqual([]);
  });

  it('balance model: a cash-out confirmed by its webhook counts exactly; one never answered only widens the tolerance', async () => {
    const accounts = [{ accountId: 1, merchant: 0, opening: 1_000_000, cashOutFee: 700, cashInFee: 0, webhookKey: '1' }];
    const cashOut = op({ id: 'chaos-1', kind: 'cash_out', accountId: 1, body: { amount: 100 }, acked: { at: 0, status: 201, body: { transaction_id: 'PIXOUT1' } } });
    const confirmed = { deliveryId: 'd1', attempt: 1, event: 'pix.payout.confirmed', webhookKey: '1', body: JSON.stringify({ transaction_id: 'PIXOUT1', amount: 10_000, fee_amount: 700 }), signatureOk: true, at: 0, answered: 200 };
    const books = (total: number) => (async () => [{ account_id: '1', total: String(total) }]) as never;
    const run = async (ops: Op[], total: number, receipts = [confirmed]) => {
      const c = collect();
      await balanceModel(books(total), ops, receipts, accounts, c.add, c.figures);
      return c.found.map((f) => f.check);
    };
    expect(await run([cashOut], 1_000_000 - 10_700)).toEqual([]);
    expect(await run([cashOut], 1_000_000)).toEqual(['balance_model']); // confirmed but not debited
    expect(await run([cashOut], 1_000_000 - 2 * 10_700)).toEqual(['balance_model']); // debited twice
    const lost = op({ id: 'chaos-2', kind: 'cash_out', accountId: 1, body: { amount: 100 } });
    expect(await run([cashOut, lost], 1_000_000 - 2 * 10_700)).toEqual([]);
    expect(await run([cashOut, lost], 1_000_000 - 10_700)).toEqual([]);
    const refused = op({ id: 'chaos-3', kind: 'cash_out', accountId: 1, body: { amount: 100 }, refused: { status: 422, text: '{}' } });
    expect(await run([cashOut, refused], 1_000_000 - 2 * 10_700)).toEqual(['balance_model']); // refused yet debited
  });
});
