import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { railNotificationHandler } from '../../src/pix/railEvents.js';
import * as repo from '../../src/pix/repository.js';
import { BASE_UNITS_PER_CENT as U } from '../../src/lib/money.js';
import type { RailNotification } from '../../src/rail/rail.js';
import type { SimulatedRail } from '../../src/rail/sim/simulatedRail.js';
import { BACKENDS } from '../helpers/db.js';
import { merchantWithKey, type MerchantFixture } from '../helpers/client.js';
import { balances, expectLedgerConsistent, foreignKey, outbox, txRow } from '../helpers/pix.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { recordStatements } from '../helpers/statements.js';

/**
 * Issue 12: the `payment.settled` notifications of one delivery batch of the rail are applied by
 * the service in two statements and no transaction (the records read; then one statement for the
 * rail_inbox ids, the records locked, the ledger, the records, the events, the books taken there in
 * ledger-account id order), instead of one transaction each.
 */
describe.each(BACKENDS)('settlements of a delivery batch in one statement on %s', (backend) => {
  let s: TestServer;
  let rail: SimulatedRail;
  let merchants: MerchantFixture[];
  let receiver: string;
  const DEPOSIT = 1_000_000;
  beforeAll(async () => {
    // No background workers: the test runs the rail's engine (tick) itself.
    s = await startTestServer({ backend, workers: false, env: { SIM_SETTLEMENT_MS: '0', SIM_SEED: '7' } });
    rail = s.ctx.rail as unknown as SimulatedRail;
    merchants = [];
    for (let i = 0; i < 3; i++) merchants.push(await merchantWithKey(s, { depositCents: DEPOSIT }));
    // One account with a cash-out fee: its settlements have three entries (pending -> central bank + fees).
    expect((await s.admin('PATCH', `/accounts/${merchants[1]!.accountId}`, { cash_out_fee_cents: 50 })).status).toBe(200);
    receiver = await foreignKey(s);
  });
  afterAll(async () => {
    await expectLedgerConsistent(s.ctx.db);
    await s?.close();
  });

  /** A cash-out acknowledged by the rail (stage 2), not settled yet (the engine does not run). */
  async function cashOut(m: MerchantFixture, amount: number, pixKey = receiver): Promise<Record<string, any>> {
    const res = await m.client.post('/pix/cash-out', { amount, pix_key: pixKey });
    expect(res.status).toBe(200);
    return txRow(s.ctx.db, res.body.transaction_id);
  }

  const settled = (row: Record<string, any>, settledAt: Date): RailNotification => ({
    id: `payment.settled:${row.end_to_end_id}`,
    at: settledAt,
    kind: 'payment.settled',
    endToEndId: row.end_to_end_id,
    settledAt,
  });

  const counts = async () => {
    const [row] = await s.ctx.db.query<{ entries: number; events: number; inbox: number }>(
      `SELECT (SELECT count(*) FROM ledger_entries)::int AS entries, (SELECT count(*) FROM outbox_events)::int AS events,
              (SELECT count(*) FROM rail_inbox)::int AS inbox`,
    );
    return row!;
  };

  it('N cash-outs of several accounts are settled by two statements and no transaction; books, ledger and events as one by one', async () => {
    const before = await Promise.all(merchants.map((m) => balances(s.ctx.db, m.accountId)));
    const rows: Record<string, any>[] = [];
    // Newest account first: the notifications come in the reverse of the books' id order.
    for (const m of [...merchants].reverse()) for (const amount of [1000, 2000, 3000]) rows.push(await cashOut(m, amount));
    const counter = recordStatements(s.ctx.db);
    try {
      await rail.tick();
    } finally {
      counter.stop();
    }
    const log = counter.log;
    // Due settlements, their notifications leased and returned (1), the service's two statements
    // outside any transaction (2), delete (1), the claim a direct tick makes, which finds nothing
    // (1). It was a transaction of four (BEGIN, records locked, write, COMMIT: 7 in all, the books
    // held from the write until this process sent COMMIT); before the settlements' notifications
    // were leased by the statement that queued them there was a claim more (8); one by one it was
    // 4 + 5 per settlement (BEGIN, rail_inbox, record lock, settlement, COMMIT): 49 for these 9.
    expect(log.filter((st) => st.tx !== null)).toEqual([]);
    const service = log.filter((st) => /\b(transactions|rail_inbox)\b/.test(st.text));
    expect(service.map((st) => st.text.replace(/\s+/g, ' ').slice(0, 40))).toEqual([
      expect.stringMatching(/^SELECT t\.\*, a\.merchant_id/),
      expect.stringMatching(/^WITH ins AS \( INSERT INTO rail_inbox/),
    ]);
    expect(log).toHaveLength(5);

    for (const row of rows) {
      const after = await txRow(s.ctx.db, row.transaction_id);
      expect(after).toMatchObject({ stage: 3, status: 1, payment_status: 'settled' });
      expect(after.completed_at).not.toBeNull();
      const events = await outbox(s.ctx.db, row.transaction_id);
      expect(events.map((e) => e.event)).toEqual(['pix.payout.processing', 'pix.payout.confirmed']);
      const [processing, confirmed] = events;
      // The confirmed body is the processing one plus settled_at, with the catalog's status.
      const { event: _e, status: _s, ...common } = processing!.payload;
      expect(confirmed!.payload).toEqual({ ...common, event: 'pix.payout.confirmed', status: 'settled', settled_at: expect.any(String) });
      expect(confirmed).toMatchObject({ merchant_id: processing!.merchant_id, account_id: row.account_id });
    }
    for (const [i, m] of merchants.entries()) {
      const fee = i === 1 ? 50 * 3 : 0;
      expect(await balances(s.ctx.db, m.accountId)).toEqual({ available: before[i]!.available - (6000 + fee) * U, blocked: 0, pending: 0 });
    }
    await expectLedgerConsistent(s.ctx.db);
    // The books are taken by the running balance in entry order: the entries on merchant books were
    // written in ledger-account id order (the lock order of every money movement), not in the
    // order the notifications came (newest account first).
    const pendingBooks = await s.ctx.db.query<{ ledger_account_id: number }>(
      `SELECT e.ledger_account_id FROM ledger_entries e JOIN ledger_transactions lt ON lt.id = e.ledger_transaction_id
         JOIN ledger_accounts la ON la.id = e.ledger_account_id
        WHERE lt.kind = 'cash_out_settle' AND lt.reference = ANY($1::text[]) AND la.tracks_balance ORDER BY e.id`,
      [rows.map((r) => r.transaction_id)],
    );
    const order = pendingBooks.map((r) => Number(r.ledger_account_id));
    expect(order).toHaveLength(rows.length);
    expect(order).toEqual([...order].sort((a, b) => a - b));

    // The rail delivers again (a crash before it deleted them): nothing happens.
    const handler = railNotificationHandler(s.ctx);
    const again = rows.map((r) => settled(r, new Date()));
    const was = await counts();
    expect(await handler.batch!(again)).toEqual(again.map(() => ({ ok: true, value: undefined })));
    expect(await counts()).toEqual(was);
    for (const row of rows) expect(await outbox(s.ctx.db, row.transaction_id)).toHaveLength(2);
  });

  it('the same body and ledger as the one-notification path (other rails, sandbox), which still works', async () => {
    const m = merchants[1]!;
    const one = await cashOut(m, 1500);
    const two = await cashOut(m, 1500);
    const at = new Date('2026-11-23T12:00:00.000Z');
    const handler = railNotificationHandler(s.ctx);
    await handler(settled(one, at));
    expect(await handler.batch!([settled(two, at)])).toEqual([{ ok: true, value: undefined }]);
    const bodies = await Promise.all([one, two].map(async (r) => (await outbox(s.ctx.db, r.transaction_id)).at(-1)!.payload));
    const strip = (b: Record<string, any>) => ({ ...b, transaction_id: '', end_to_end_id: '', created_at: '' });
    expect(strip(bodies[1]!)).toEqual(strip(bodies[0]!));
    expect(bodies[1]!.settled_at).toBe(at.toISOString());
    const entries = (r: Record<string, any>) =>
      s.ctx.db.query(
        `SELECT la.code, e.amount FROM ledger_transactions lt JOIN ledger_entries e ON e.ledger_transaction_id = lt.id
           JOIN ledger_accounts la ON la.id = e.ledger_account_id WHERE lt.reference = $1 AND lt.kind = 'cash_out_settle' ORDER BY la.code`,
        [r.transaction_id],
      );
    expect(await entries(two)).toEqual(await entries(one));
    expect(await entries(two)).toEqual([
      { code: `account:${m.accountId}:pending`, amount: -1550 * U },
      { code: 'institution:central_bank', amount: 1500 * U },
      { code: 'institution:fees', amount: 50 * U },
    ]);
  });

  it('two batches over the same accounts in opposite orders at once: both applied as batches (no deadlock, no fallback)', async () => {
    const rows: Record<string, any>[] = [];
    for (const m of merchants) for (const amount of [800, 900]) rows.push(await cashOut(m, amount));
    const warnings: unknown[] = [];
    const log = Object.assign(Object.create(s.ctx.log), { warn: (...args: unknown[]) => void warnings.push(args) });
    const handler = railNotificationHandler({ ...s.ctx, log });
    const at = new Date();
    const first = rows.filter((_, i) => i % 2 === 0).map((r) => settled(r, at));
    const second = rows.filter((_, i) => i % 2 === 1).map((r) => settled(r, at)).reverse();
    const outcomes = await Promise.all([handler.batch!(first), handler.batch!(second)]);
    expect(outcomes.flat().every((o) => o.ok)).toBe(true);
    expect(warnings).toEqual([]);
    for (const r of rows) expect((await txRow(s.ctx.db, r.transaction_id)).stage).toBe(3);
    await expectLedgerConsistent(s.ctx.db);
  });

  it('a settlement that overtook the acknowledgement (record at stage 1) announces pix.payout.processing first', async () => {
    const row = await cashOut(merchants[0]!, 700);
    // As if step 3 had not recorded the rail's answer yet.
    await s.ctx.db.query(`UPDATE transactions SET stage = 1 WHERE id = $1`, [row.id]);
    await s.ctx.db.query(`DELETE FROM outbox_events WHERE subject = $1`, [row.transaction_id]);
    const handler = railNotificationHandler(s.ctx);
    expect(await handler.batch!([settled(row, new Date())])).toEqual([{ ok: true, value: undefined }]);
    expect((await outbox(s.ctx.db, row.transaction_id)).map((e) => e.event)).toEqual(['pix.payout.processing', 'pix.payout.confirmed']);
    expect((await txRow(s.ctx.db, row.transaction_id)).stage).toBe(3);
  });

  it('a record that moved between the read and the statement is settled as of its lock: acknowledged meanwhile, no second pix.payout.processing; settled meanwhile, nothing', async () => {
    const m = merchants[2]!;
    const acknowledged = await cashOut(m, 600);
    const settledMeanwhile = await cashOut(m, 650);
    // Both read at stage 1 (the acknowledgement not recorded yet, its event not written).
    await s.ctx.db.query(`UPDATE transactions SET stage = 1 WHERE id = ANY($1::uuid[])`, [[acknowledged.id, settledMeanwhile.id]]);
    await s.ctx.db.query(`DELETE FROM outbox_events WHERE subject = ANY($1::text[])`, [[acknowledged.transaction_id, settledMeanwhile.transaction_id]]);
    const read = await repo.readCashOutsForSettlement(s.ctx.db, [acknowledged.end_to_end_id, settledMeanwhile.end_to_end_id]);
    expect(read.map((r) => r.stage)).toEqual([1, 1]);
    // Then, before the statement: the first acknowledged (stage 2), the second settled by another
    // notification of the rail.
    await s.ctx.db.query(`UPDATE transactions SET stage = 2 WHERE id = $1`, [acknowledged.id]);
    expect(await railNotificationHandler(s.ctx).batch!([settled(settledMeanwhile, new Date())])).toEqual([{ ok: true, value: undefined }]);
    const before = { ...(await counts()), pending: (await balances(s.ctx.db, m.accountId)).pending };
    const at = new Date();
    const items = read.map((row, n) => ({
      notificationId: `payment.settled:late-${n}-${row.end_to_end_id}`,
      row,
      settledAt: at,
      processing: { event: 'pix.payout.processing', marker: 'processing' },
      confirmed: { event: 'pix.payout.confirmed', marker: 'confirmed' },
    }));
    const fresh = await repo.settleCashOuts(s.ctx.db, items.map((i) => ({ id: i.notificationId, at })), items, at);
    expect(fresh).toEqual(new Set(items.map((i) => i.notificationId)));
    // The acknowledged one: settled, with pix.payout.confirmed only (its processing event is the
    // acknowledgement's); one ledger transaction: two entries.
    expect(await txRow(s.ctx.db, acknowledged.transaction_id)).toMatchObject({ stage: 3, payment_status: 'settled' });
    expect((await outbox(s.ctx.db, acknowledged.transaction_id)).map((e) => [e.event, e.payload.marker])).toEqual([['pix.payout.confirmed', 'confirmed']]);
    // The one settled meanwhile: its first settlement's events only, nothing more.
    expect((await outbox(s.ctx.db, settledMeanwhile.transaction_id)).map((e) => e.event)).toEqual(['pix.payout.processing', 'pix.payout.confirmed']);
    const after = { ...(await counts()), pending: (await balances(s.ctx.db, m.accountId)).pending };
    expect(after).toEqual({
      entries: before.entries + 2,
      events: before.events + 1,
      inbox: before.inbox + 2,
      pending: before.pending - 600 * U,
    });
    await expectLedgerConsistent(s.ctx.db);
  });

  it('one bad notification in a delivery batch does not block the others (nor the other kinds); it is retried alone', async () => {
    const rejectKey = await foreignKey(s, { behavior: 'reject' });
    const rows = [await cashOut(merchants[0]!, 1100), await cashOut(merchants[1]!, 1200), await cashOut(merchants[2]!, 1300)];
    const rejected = await cashOut(merchants[2]!, 1400, rejectKey);
    const bad = rows[1]!;
    // A malformed notification of the second cash-out, older than the real one: delivered first.
    await s.ctx.db.query(
      `INSERT INTO sim_notifications (notification_id, subject, kind, payload, created_at)
       VALUES ($1, $2, 'payment.settled', $3::jsonb, now())`,
      [`payment.settled:bad-${bad.end_to_end_id}`, bad.end_to_end_id, JSON.stringify({ kind: 'payment.settled', endToEndId: bad.end_to_end_id, settledAt: 'not a date' })],
    );
    await rail.tick();
    for (const r of [rows[0]!, rows[2]!]) expect(await txRow(s.ctx.db, r.transaction_id)).toMatchObject({ stage: 3, payment_status: 'settled' });
    expect(await txRow(s.ctx.db, rejected.transaction_id)).toMatchObject({ stage: 3, payment_status: 'rejected' });
    expect(await txRow(s.ctx.db, bad.transaction_id)).toMatchObject({ stage: 2, payment_status: 'processing' });
    const [left] = await s.ctx.db.query<{ last_error: string | null }>('SELECT last_error FROM sim_notifications WHERE notification_id = $1', [
      `payment.settled:bad-${bad.end_to_end_id}`,
    ]);
    expect(left!.last_error).toMatch(/invalid time value/i);

    // Once the bad one is gone, the real one is delivered.
    await s.ctx.db.query('DELETE FROM sim_notifications WHERE notification_id = $1', [`payment.settled:bad-${bad.end_to_end_id}`]);
    await rail.tick();
    expect(await txRow(s.ctx.db, bad.transaction_id)).toMatchObject({ stage: 3, payment_status: 'settled' });
    expect((await outbox(s.ctx.db, bad.transaction_id)).map((e) => e.event)).toEqual(['pix.payout.processing', 'pix.payout.confirmed']);
    await expectLedgerConsistent(s.ctx.db);
  });
});
