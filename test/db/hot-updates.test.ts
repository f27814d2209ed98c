import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { outboxBody } from '../../src/events/outbox.js';
import { payoutBody } from '../../src/pix/events.js';
import * as repo from '../../src/pix/repository.js';
import type { OwnedTransaction } from '../../src/pix/repository.js';
import { sqlState, type Sql } from '../../src/db/db.js';
import { BACKENDS } from '../helpers/db.js';
import { merchantWithKey, type MerchantFixture } from '../helpers/client.js';
import { foreignKey, txRow } from '../helpers/pix.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

/**
 * A cash-out's record is written three times: inserted at stage 1, acknowledged (stage 2), final
 * (stage 3). The acknowledgement changes no column any index reads (issue 12, migration 0680), so
 * PostgreSQL updates the row in place (a heap-only tuple: no new entry in any of the table's
 * indexes) when its page has room, which the table's fillfactor leaves. Counted inside the
 * transaction that moves the record (pg_stat_xact_user_tables), so nothing else can blur it.
 */
describe.each(BACKENDS)('the acknowledgement of a cash-out updates its record in place on %s', (backend) => {
  let s: TestServer;
  let m: MerchantFixture;
  let receiver: string;
  beforeAll(async () => {
    // No settlement while the test runs: the records stay at stage 2 until the test moves them.
    s = await startTestServer({ backend, workers: false, env: { SIM_SETTLEMENT_MS: '3600000' } });
    m = await merchantWithKey(s, { depositCents: 1_000_000 });
    receiver = await foreignKey(s);
  });
  afterAll(async () => {
    await s?.close();
  });

  /** A cash-out the rail took, put back at stage 1 (as if its acknowledgement were not recorded yet). */
  async function unacknowledged(amount: number): Promise<OwnedTransaction> {
    const res = await m.client.post('/pix/cash-out', { amount, pix_key: receiver });
    expect(res.status).toBe(200);
    const row = await txRow(s.ctx.db, res.body.transaction_id);
    await s.ctx.db.query('UPDATE transactions SET stage = 1 WHERE id = $1', [row.id]);
    await s.ctx.db.query('VACUUM transactions'); // the page's dead versions gone: room as on a page of fresh records
    return (await repo.findById(s.ctx.db, row.id))!;
  }

  /** Updates of `transactions` by this transaction so far: all, and those made in place (HOT). */
  async function updates(tx: Sql): Promise<{ all: number; hot: number }> {
    const [row] = await tx.query<{ all: number; hot: number }>(
      `SELECT n_tup_upd::int AS all, n_tup_hot_upd::int AS hot FROM pg_stat_xact_user_tables
        WHERE relid = 'transactions'::regclass`,
    );
    return row ?? { all: 0, hot: 0 };
  }

  it('stage 1 -> 2 (markSentWithEvents, the acknowledgement of every cash-out) is a heap-only update', async () => {
    const rows = [await unacknowledged(1000), await unacknowledged(2000)];
    const now = new Date();
    const counted = await s.ctx.db.transaction(async (tx) => {
      const before = await updates(tx);
      const moved = await repo.markSentWithEvents(
        tx,
        rows.map((row) => ({
          row,
          paymentStatus: 'processing' as const,
          now,
          event: { event: 'pix.payout.processing', body: outboxBody('pix.payout.processing', payoutBody(row)) },
          answer: null,
        })),
      );
      expect(moved).toEqual([{ recorded: false }, { recorded: false }]);
      const after = await updates(tx);
      return { all: after.all - before.all, hot: after.hot - before.hot };
    });
    expect(counted).toEqual({ all: 2, hot: 2 });
    for (const row of rows) expect(await txRow(s.ctx.db, row.transaction_id)).toMatchObject({ stage: 2, payment_status: 'processing', statement_status: 'in_flight' });
  });

  it('the recovery still finds a record left at stage 1, through the index of records in flight', async () => {
    const row = await unacknowledged(3000);
    const later = new Date(Date.now() + 60_000);
    expect(await repo.oldestUnsent(s.ctx.db)).toEqual(row.updated_at);
    const claimed = await repo.claimUnsent(s.ctx.db, later, later, 10);
    expect(claimed.map((r) => r.transaction_id)).toEqual([row.transaction_id]);
    expect(await repo.claimUnsent(s.ctx.db, later, later, 10)).toEqual([]); // bumped: not stale any more
  });

  it('a record at stage 1 is always one the statement shows in flight (so the index of records in flight holds every one)', async () => {
    const row = await txRow(s.ctx.db, (await m.client.post('/pix/cash-out', { amount: 500, pix_key: receiver })).body.transaction_id);
    // An inbound record at stage 1 would be outside the index the recovery reads: refused.
    const err = await s.ctx.db.query(`UPDATE transactions SET direction = 'inbound', stage = 1 WHERE id = $1`, [row.id]).then(() => null, (e: unknown) => e);
    expect(sqlState(err)).toBe('23514');
    expect(await txRow(s.ctx.db, row.transaction_id)).toMatchObject({ direction: 'outbound', stage: 2 });
  });
});
