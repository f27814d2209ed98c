import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { expireDueCharges, matchInboundPayment } from '../src/pix/cashin/charges.js';
import { markPaid } from '../src/pix/cashin/repository.js';
import { addPixKey, merchantWithKey, type MerchantFixture } from './helpers/client.js';
import { BACKENDS, openTestDatabase } from './helpers/db.js';
import { eventually, ManualClock } from './helpers/fixtures.js';
import { startTestServer, type TestServer } from './helpers/server.js';

async function chargeState(s: TestServer, transactionId: string) {
  const [row] = await s.ctx.db.query<{ charge_status: string; tx_status: number; expired_at: Date | null }>(
    `SELECT c.status AS charge_status, t.status AS tx_status, c.expired_at
       FROM pix_charges c JOIN transactions t ON t.id = c.transaction_uuid WHERE t.transaction_id = $1`,
    [transactionId],
  );
  return row!;
}

async function events(s: TestServer, transactionId: string, event: string) {
  return s.ctx.db.query<{ payload: any }>('SELECT payload FROM outbox_events WHERE subject = $1 AND event = $2', [transactionId, event]);
}

async function expiredBy(s: TestServer, transactionId: string) {
  return eventually(async () => ((await chargeState(s, transactionId)).charge_status === 'expired' ? true : undefined), 5000, `charge ${transactionId} to expire`);
}

async function merchantWithPixKey(s: TestServer): Promise<MerchantFixture> {
  const m = await merchantWithKey(s);
  await addPixKey(s, m.accountId, 'evp');
  return m;
}

describe.each(BACKENDS)('charge expiry on %s', (backend) => {
  const clock = new ManualClock(Date.parse('2026-05-01T09:00:00.000Z'));
  let s: TestServer;
  let m: MerchantFixture;
  beforeAll(async () => {
    s = await startTestServer({ backend, clock });
    m = await merchantWithPixKey(s);
  });
  afterAll(async () => s?.close());

  it('the worker expires a charge at its deadline: status expired, record out of pending, one pix.charge.expired', async () => {
    const created = await m.client.post('/pix/cash-in', { amount: 2500, expires_in: 60, tag: 'balcao', external_id: 'exp-1' });
    expect(created.status).toBe(201);
    const id = created.body.transaction_id;

    clock.advance(59_999);
    expect(await expireDueCharges(s.ctx.db, s.ctx.clock)).toBe(0);
    expect((await chargeState(s, id)).charge_status).toBe('created');

    clock.advance(1); // now = expires_at: no longer payable
    await expiredBy(s, id);
    expect(await chargeState(s, id)).toEqual({ charge_status: 'expired', tx_status: 4, expired_at: new Date(created.body.expires_at) });
    expect(await events(s, id, 'pix.charge.expired')).toEqual([
      {
        payload: {
          event: 'pix.charge.expired',
          status: 'expired',
          transaction_id: id,
          txid: created.body.txid,
          amount: 250_000,
          expires_at: created.body.expires_at,
          expired_at: created.body.expires_at,
          tag: 'balcao',
          external_id: 'exp-1',
        },
      },
    ]);

    // Later sweeps find nothing; the event stays single.
    clock.advance(3_600_000);
    expect(await expireDueCharges(s.ctx.db, s.ctx.clock)).toBe(0);
    expect(await events(s, id, 'pix.charge.expired')).toHaveLength(1);

    // Asking again with the same external_id answers the charge as it is now.
    const again = await m.client.post('/pix/cash-in', { amount: 2500, expires_in: 60, tag: 'balcao', external_id: 'exp-1' });
    expect(again.status).toBe(200);
    expect(again.body).toMatchObject({ transaction_id: id, status: 'expired', expired_at: created.body.expires_at, paid_at: null });
  });
});

describe.each(BACKENDS)('charge expiry across a restart on %s', (backend) => {
  it('a charge whose deadline passes while the server is down is expired by the next process', async () => {
    const clock = new ManualClock(Date.parse('2026-05-01T09:00:00.000Z'));
    let database = await openTestDatabase(backend);
    try {
      const first = await startTestServer({ database, clock });
      const m = await merchantWithPixKey(first);
      const due = await m.client.post('/pix/cash-in', { amount: 100, expires_in: 120 });
      const later = await m.client.post('/pix/cash-in', { amount: 200, expires_in: 3600 });
      expect([due.status, later.status]).toEqual([201, 201]);
      await first.close();

      database = await database.reopen();
      clock.advance(121_000);
      const second = await startTestServer({ database, clock });
      try {
        await expiredBy(second, due.body.transaction_id);
        expect(await events(second, due.body.transaction_id, 'pix.charge.expired')).toHaveLength(1);
        expect((await chargeState(second, later.body.transaction_id)).charge_status).toBe('created');
        expect(await events(second, later.body.transaction_id, 'pix.charge.expired')).toHaveLength(0);
      } finally {
        await second.close();
      }
    } finally {
      await database.close();
    }
  });
});

describe.each(BACKENDS)('expiry sweeps and payment matching on %s', (backend) => {
  const clock = new ManualClock(Date.parse('2026-05-01T09:00:00.000Z'));
  let s: TestServer;
  let m: MerchantFixture;
  beforeAll(async () => {
    s = await startTestServer({ backend, clock, workers: false });
    m = await merchantWithPixKey(s);
  });
  afterAll(async () => s?.close());

  it('a sweep expires every due charge in batches, each once', async () => {
    const ids: string[] = [];
    for (let i = 0; i < 5; i++) ids.push((await m.client.post('/pix/cash-in', { amount: 100 + i, expires_in: 60 })).body.transaction_id);
    clock.advance(60_000);
    expect(await expireDueCharges(s.ctx.db, s.ctx.clock, 2)).toBe(5);
    expect(await expireDueCharges(s.ctx.db, s.ctx.clock, 2)).toBe(0);
    for (const id of ids) expect(await events(s, id, 'pix.charge.expired')).toHaveLength(1);
  });

  it('matchInboundPayment (for part 2): txid, account, deadline, amount and state decide', async () => {
    const charge = (await m.client.post('/pix/cash-in', { amount: 1590, expires_in: 600 })).body;
    const other = await merchantWithPixKey(s);
    const now = clock.now();
    const match = (p: { accountId?: number; txid?: string | null; amount?: number; at?: Date }) =>
      s.ctx.db.transaction(async (tx) => {
        const r = await matchInboundPayment(tx, { accountId: m.accountId, txid: charge.txid, amount: 159_000, at: now, ...p });
        return r.matched ? { matched: true, id: r.charge.transaction_id } : { matched: false, reason: r.reason, id: r.charge?.transaction_id ?? null };
      });
    expect(await match({})).toEqual({ matched: true, id: charge.transaction_id });
    expect(await match({ txid: null })).toEqual({ matched: false, reason: 'no_txid', id: null });
    expect(await match({ txid: 'NOSUCHTXID' })).toEqual({ matched: false, reason: 'unknown_txid', id: null });
    expect(await match({ accountId: other.accountId })).toEqual({ matched: false, reason: 'other_account', id: null });
    expect(await match({ amount: 158_999 })).toEqual({ matched: false, reason: 'amount_mismatch', id: charge.transaction_id });
    expect(await match({ at: new Date(charge.expires_at) })).toEqual({ matched: false, reason: 'expired', id: charge.transaction_id });

    expect(await s.ctx.db.transaction((tx) => markPaid(tx, charge.id, now))).toBe(true);
    expect(await s.ctx.db.transaction((tx) => markPaid(tx, charge.id, now))).toBe(false);
    expect(await match({})).toEqual({ matched: false, reason: 'paid', id: charge.transaction_id });
    // A paid charge is never expired.
    clock.advance(3_600_000);
    await expireDueCharges(s.ctx.db, s.ctx.clock);
    expect((await chargeState(s, charge.transaction_id)).charge_status).toBe('paid');
    expect(await events(s, charge.transaction_id, 'pix.charge.expired')).toHaveLength(0);

    const stale = (await m.client.post('/pix/cash-in', { amount: 100, expires_in: 60 })).body;
    clock.advance(60_000);
    await expireDueCharges(s.ctx.db, s.ctx.clock);
    expect(await match({ txid: stale.txid, amount: 10_000, at: clock.now() })).toEqual({ matched: false, reason: 'expired', id: stale.transaction_id });
  });
});
