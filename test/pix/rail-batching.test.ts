import { randomBytes, randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { PaymentOrder } from '../../src/rail/rail.js';
import type { SimulatedRail } from '../../src/rail/sim/simulatedRail.js';
import { BACKENDS } from '../helpers/db.js';
import { merchantWithKey, type MerchantFixture } from '../helpers/client.js';
import { foreignKey, sandbox } from '../helpers/pix.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { recordStatements } from '../helpers/statements.js';

/**
 * Issue 12: the rail's steps done for many requests at once (src/lib/batcher.ts). Concurrent
 * directory look-ups and payment orders each become one statement, and every caller still gets its
 * own answer.
 */
describe.each(BACKENDS)('the simulated rail batches concurrent calls on %s', (backend) => {
  let s: TestServer;
  let m: MerchantFixture;
  let settleKey: string;
  let timeoutKey: string;
  let fraudKey: string;
  const missingKey = 'nobody-at-all@example.com';
  beforeAll(async () => {
    // No background workers: the only statements are the ones of the calls.
    s = await startTestServer({ backend, workers: false, env: { SIM_SETTLEMENT_MS: '0', SIM_SEED: '7' } });
    m = await merchantWithKey(s, { depositCents: 1_000_000 });
    settleKey = await foreignKey(s, { name: 'Ana Liquida' });
    timeoutKey = await foreignKey(s, { behavior: 'timeout', name: 'Bia Lenta' });
    fraudKey = await foreignKey(s, { fraudFlagged: true, name: 'Caio Marcado' });
  });
  afterAll(async () => s?.close());

  it('concurrent directory look-ups are one statement; each caller gets its own entry or null', async () => {
    const counter = recordStatements(s.ctx.db);
    let answers;
    try {
      answers = await Promise.all([settleKey, missingKey, timeoutKey, fraudKey, settleKey].map((k) => s.ctx.rail.directory.lookupKey(k)));
    } finally {
      counter.stop();
    }
    expect(counter.log.map((st) => st.text.replace(/\s+/g, ' '))).toEqual(['SELECT * FROM sim_dict_entries WHERE key = ANY($1::text[])']);
    expect(answers.map((a) => a && { key: a.key, name: a.name, fraudFlagged: a.fraudFlagged, ispb: a.ispb })).toEqual([
      { key: settleKey, name: 'Ana Liquida', fraudFlagged: false, ispb: '18236120' },
      null,
      { key: timeoutKey, name: 'Bia Lenta', fraudFlagged: false, ispb: '18236120' },
      { key: fraudKey, name: 'Caio Marcado', fraudFlagged: true, ispb: '18236120' },
      { key: settleKey, name: 'Ana Liquida', fraudFlagged: false, ispb: '18236120' },
    ]);
    expect(answers[0]!.bankName).toBe('Nu Pagamentos S.A.');
    // Alone, a look-up is still answered (a batch of one).
    expect((await s.ctx.rail.directory.lookupKey(fraudKey))?.name).toBe('Caio Marcado');
    expect(await s.ctx.rail.directory.lookupKey(missingKey)).toBeNull();
  });

  const order = (receiverKey: string, endToEndId = `E${randomBytes(12).toString('hex')}`): PaymentOrder => ({
    endToEndId,
    transactionId: `PIXOUT-${randomUUID()}`,
    amount: 1000,
    payer: { name: 'Loja Teste', document: '11444777000161', ispb: s.ctx.config.institutionIspb, accountId: m.accountId },
    receiverKey,
    description: null,
    txid: null,
  });

  const payments = (ids: string[]) =>
    s.ctx.db.query<{ end_to_end_id: string; status: string; reason_code: string | null; behavior: string }>(
      'SELECT end_to_end_id, status, reason_code, behavior FROM sim_payments WHERE end_to_end_id = ANY($1::text[]) ORDER BY end_to_end_id',
      [ids],
    );

  it('concurrent payment orders are one statement; each gets its own ack (accepted, queued, timeout), a duplicate one payment and the same ack', async () => {
    const orders = [order(settleKey), order(missingKey), order(timeoutKey), order(fraudKey)];
    const duplicate = orders[0]!;
    const counter = recordStatements(s.ctx.db);
    let acks;
    try {
      acks = await Promise.all([...orders, duplicate].map((o) => s.ctx.rail.sendPayment(o)));
    } finally {
      counter.stop();
    }
    expect(counter.log).toHaveLength(1);
    expect(counter.log[0]!.text).toMatch(/sim_payments/);
    expect(acks).toEqual([{ status: 'accepted' }, { status: 'accepted' }, { status: 'timeout' }, { status: 'queued' }, { status: 'accepted' }]);
    const rows = await payments(orders.map((o) => o.endToEndId));
    const byId = new Map(rows.map((r) => [r.end_to_end_id, r]));
    expect(rows).toHaveLength(3); // the timeout key took nothing; the duplicate is one payment
    expect(byId.get(orders[0]!.endToEndId)).toMatchObject({ status: 'in_flight', behavior: 'settle', reason_code: null });
    expect(byId.get(orders[1]!.endToEndId)).toMatchObject({ status: 'in_flight', behavior: 'reject', reason_code: 'KEY_NOT_FOUND' });
    expect(byId.get(orders[3]!.endToEndId)).toMatchObject({ status: 'protection', behavior: 'settle' });

    // Sent again (a retry): the same acks, nothing new taken.
    const again = await Promise.all(orders.map((o) => s.ctx.rail.sendPayment(o)));
    expect(again).toEqual([{ status: 'accepted' }, { status: 'accepted' }, { status: 'timeout' }, { status: 'queued' }]);
    expect(await payments(orders.map((o) => o.endToEndId))).toEqual(rows);
  });

  it('an order sent again after protection let its payment go is still acknowledged "queued", as it was first (and a settled one "accepted")', async () => {
    const queued = order(fraudKey);
    const plain = order(settleKey);
    expect(await Promise.all([queued, plain].map((o) => s.ctx.rail.sendPayment(o)))).toEqual([{ status: 'queued' }, { status: 'accepted' }]);
    // Protection and settlement due now: the engine lets the payment go, then settles both.
    await s.ctx.db.query('UPDATE sim_payments SET due_at = now() WHERE end_to_end_id = ANY($1::text[])', [[queued.endToEndId, plain.endToEndId]]);
    await (s.ctx.rail as unknown as SimulatedRail).tick();
    await (s.ctx.rail as unknown as SimulatedRail).tick();
    expect((await payments([queued.endToEndId, plain.endToEndId])).map((p) => p.status)).toEqual(['settled', 'settled']);
    // A recovery (or a client's retry of a record still at stage 1) sends the same order again:
    // pixgate records what this answer says, so "accepted" here would skip pix.payout.queued.
    expect(await Promise.all([queued, plain].map((o) => s.ctx.rail.sendPayment(o)))).toEqual([{ status: 'queued' }, { status: 'accepted' }]);
  });

  it('one bad order (its transaction id taken by another order) fails alone; the others of its batch are taken', async () => {
    const first = order(settleKey);
    expect(await s.ctx.rail.sendPayment(first)).toEqual({ status: 'accepted' });
    const bad = { ...order(settleKey), transactionId: first.transactionId };
    const good = [order(settleKey), order(fraudKey)];
    const results = await Promise.allSettled([good[0]!, bad, good[1]!].map((o) => s.ctx.rail.sendPayment(o)));
    expect(results.map((r) => r.status)).toEqual(['fulfilled', 'rejected', 'fulfilled']);
    expect(results.map((r) => (r.status === 'fulfilled' ? r.value : null))).toEqual([{ status: 'accepted' }, null, { status: 'queued' }]);
    expect(await payments([...good, bad].map((o) => o.endToEndId))).toHaveLength(2);
  });

  it('the stall switch delays every answer of a batch (the orders are taken), and drop loses them', async () => {
    expect((await sandbox(s, 'PUT', '/rail/stall', { delay_ms: 300, drop: false })).status).toBe(200);
    try {
      const orders = [order(settleKey), order(fraudKey)];
      const started = Date.now();
      const acks = await Promise.all(orders.map((o) => s.ctx.rail.sendPayment(o)));
      expect(Date.now() - started).toBeGreaterThanOrEqual(290);
      expect(acks).toEqual([{ status: 'accepted' }, { status: 'queued' }]);

      expect((await sandbox(s, 'PUT', '/rail/stall', { delay_ms: 0, drop: true })).status).toBe(200);
      const dropped = [order(settleKey), order(settleKey)];
      const answered: unknown[] = [];
      for (const o of dropped) void s.ctx.rail.sendPayment(o).then((a) => answered.push(a), () => {});
      await new Promise((r) => setTimeout(r, 300));
      expect(answered).toEqual([]);
      expect(await payments(dropped.map((o) => o.endToEndId))).toHaveLength(2); // taken, only the answers lost
    } finally {
      await sandbox(s, 'PUT', '/rail/stall', { delay_ms: 0, drop: false });
    }
  });
});
