import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BACKENDS } from '../helpers/db.js';
import { merchantWithKey, type MerchantFixture } from '../helpers/client.js';
import { balances, eventNames, expectLedgerConsistent, foreignKey, sandbox, txRow, waitFor } from '../helpers/pix.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

/**
 * Money is conserved: random sequences of deposits, inbound PIX, cash-outs (settled, rejected,
 * held then decided, returned) and refunds (settled, failed) end with every book equal to its
 * entries, the ledger summing to zero, nothing left pending, and each account's available balance
 * equal to what a model of the answers predicts.
 */

type Command =
  | { op: 'deposit'; acct: number; cents: number }
  | { op: 'inbound'; acct: number; cents: number }
  | { op: 'cashOut'; acct: number; cents: number; behavior: 'settle' | 'reject' | 'hold' }
  | { op: 'decide'; pick: number; decision: 'settle' | 'reject' }
  | { op: 'returnPayout'; pick: number; cents: number | null }
  | { op: 'refund'; pick: number; cents: number | null; code: 'MD06' | 'BE08' | 'XX99' };

const acct = fc.integer({ min: 0, max: 1 });
const cents = fc.integer({ min: 1, max: 20_000 });
const command: fc.Arbitrary<Command> = fc.oneof(
  { arbitrary: fc.record({ op: fc.constant('deposit' as const), acct, cents }), weight: 1 },
  { arbitrary: fc.record({ op: fc.constant('inbound' as const), acct, cents }), weight: 3 },
  {
    arbitrary: fc.record({ op: fc.constant('cashOut' as const), acct, cents, behavior: fc.constantFrom('settle' as const, 'reject' as const, 'hold' as const) }),
    weight: 4,
  },
  { arbitrary: fc.record({ op: fc.constant('decide' as const), pick: fc.nat(), decision: fc.constantFrom('settle' as const, 'reject' as const) }), weight: 2 },
  { arbitrary: fc.record({ op: fc.constant('returnPayout' as const), pick: fc.nat(), cents: fc.option(cents, { nil: null }) }), weight: 2 },
  {
    arbitrary: fc.record({ op: fc.constant('refund' as const), pick: fc.nat(), cents: fc.option(cents, { nil: null }), code: fc.constantFrom('MD06' as const, 'BE08' as const, 'XX99' as const) }),
    weight: 3,
  },
);
/** Each run starts by funding both accounts with a random amount (cents, possibly 0). */
const funding = fc.tuple(fc.integer({ min: 0, max: 60_000 }), fc.integer({ min: 0, max: 60_000 }));

describe.each(BACKENDS)('money conservation on %s', (backend) => {
  let s: TestServer;
  let keys: Record<'settle' | 'reject' | 'hold', string>;
  beforeAll(async () => {
    s = await startTestServer({ backend, env: { SIM_SETTLEMENT_MS: '10', SIM_PROTECTION_MS: '50' } });
    keys = { settle: await foreignKey(s), reject: await foreignKey(s, { behavior: 'reject' }), hold: await foreignKey(s, { behavior: 'hold' }) };
  });
  afterAll(async () => s?.close());

  const settledOf = (id: string) => waitFor(() => txRow(s.ctx.db, id), (r) => r.stage === 3 || (r.stage === 2 && r.metadata.held_at !== undefined));

  it('random deposits, inbound PIX, cash-outs, returns and refunds keep every balance equal to the model and the ledger at zero', async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(command, { minLength: 8, maxLength: 30 }), fc.tuple(fc.integer({ min: 0, max: 300 }), fc.integer({ min: 0, max: 300 })), funding, async (cmds, fees, fund) => {
        const accounts: MerchantFixture[] = [await merchantWithKey(s, { depositCents: fund[0] }), await merchantWithKey(s, { depositCents: fund[1] })];
        const expected = [fund[0] * 100, fund[1] * 100];
        for (const [i, a] of accounts.entries()) await s.admin('PATCH', `/accounts/${a.accountId}`, { cash_out_fee_cents: fees[i], cash_in_fee_cents: fees[1 - i] });
        const inFee = (i: number) => fees[1 - i]! * 100;
        const outFee = (i: number) => fees[i]! * 100;
        const held: { acct: number; id: string; total: number }[] = [];
        const returnable: { acct: number; id: string; left: number }[] = [];
        const refundable: { acct: number; id: string; left: number }[] = [];
        const ids: string[] = [];

        for (const c of cmds) {
          switch (c.op) {
            case 'deposit': {
              const res = await s.admin('POST', `/accounts/${accounts[c.acct]!.accountId}/deposits`, { amount: c.cents });
              expect(res.status).toBe(201);
              expected[c.acct]! += c.cents * 100;
              break;
            }
            case 'inbound': {
              const res = await sandbox(s, 'POST', '/pix/inbound', { account_id: accounts[c.acct]!.accountId, amount: c.cents });
              expect(res.status).toBe(201);
              expected[c.acct]! += c.cents * 100 - Math.min(inFee(c.acct), c.cents * 100);
              refundable.push({ acct: c.acct, id: res.body.transaction_id, left: c.cents * 100 });
              break;
            }
            case 'cashOut': {
              const res = await accounts[c.acct]!.client.post('/pix/cash-out', { amount: c.cents, pix_key: keys[c.behavior] });
              if (res.status === 400) {
                expect(res.body.code).toBe('insufficient_balance');
                break;
              }
              expect(res.status).toBe(200);
              ids.push(res.body.transaction_id);
              const total = c.cents * 100 + outFee(c.acct);
              await settledOf(res.body.transaction_id);
              if (c.behavior === 'settle') {
                expected[c.acct]! -= total;
                returnable.push({ acct: c.acct, id: res.body.transaction_id, left: c.cents * 100 });
              }
              if (c.behavior === 'hold') {
                expected[c.acct]! -= total; // reserved until decided
                held.push({ acct: c.acct, id: res.body.transaction_id, total });
              }
              break;
            }
            case 'decide': {
              if (held.length === 0) break;
              const [h] = held.splice(c.pick % held.length, 1);
              const res = await sandbox(s, 'POST', `/payouts/${h!.id}/${c.decision}`);
              expect(res.status).toBe(200);
              if (c.decision === 'reject') expected[h!.acct]! += h!.total;
              else returnable.push({ acct: h!.acct, id: h!.id, left: (await txRow(s.ctx.db, h!.id)).amount });
              break;
            }
            case 'returnPayout': {
              if (returnable.length === 0) break;
              const r = returnable[c.pick % returnable.length]!;
              const res = await sandbox(s, 'POST', `/payouts/${r.id}/return`, c.cents === null ? undefined : { amount: c.cents });
              const value = c.cents === null ? r.left : c.cents * 100;
              if (value > 0 && value <= r.left) {
                expect(res.status).toBe(201);
                expected[r.acct]! += value;
                r.left -= value;
              } else {
                expect(res.body.returned).toBe(false);
              }
              break;
            }
            case 'refund': {
              if (refundable.length === 0) break;
              const r = refundable[c.pick % refundable.length]!;
              const res = await accounts[r.acct]!.client.post('/pix/refund', {
                original_transaction_id: r.id,
                ...(c.cents === null ? {} : { amount: c.cents }),
                reason: c.code,
              });
              if (res.status === 422) break; // over the original, or the safe balance is short
              expect(res.status).toBe(202);
              ids.push(res.body.transaction_id);
              const row = await waitFor(() => txRow(s.ctx.db, res.body.transaction_id), (x) => x.stage === 3);
              if (c.code === 'XX99') {
                expect(row.payment_status).toBe('failed');
              } else {
                expect(row.payment_status).toBe('settled');
                expected[r.acct]! -= res.body.amount;
                r.left -= res.body.amount;
              }
              break;
            }
          }
        }
        for (const h of held) {
          expect((await sandbox(s, 'POST', `/payouts/${h.id}/settle`)).status).toBe(200);
        }
        for (const id of ids) await waitFor(() => txRow(s.ctx.db, id), (r) => r.stage === 3);
        for (const [i, a] of accounts.entries()) {
          expect(await balances(s.ctx.db, a.accountId)).toEqual({ available: expected[i], blocked: 0, pending: 0 });
        }
        await expectLedgerConsistent(s.ctx.db);
      }),
      { numRuns: 10, seed: Number(process.env.FC_SEED ?? Date.now() % 100000), verbose: 1 },
    );
  });

  it('100 concurrent cash-outs on one account never overdraw it: each is debited once or not at all', async () => {
    const m = await merchantWithKey(s, { depositCents: 50 * 1010 });
    await s.admin('PATCH', `/accounts/${m.accountId}`, { cash_out_fee_cents: 10 });
    const results = await Promise.all(
      Array.from({ length: 100 }, (_, i) => m.client.post('/pix/cash-out', { amount: 1000, pix_key: keys.settle, external_id: `burst-${i}` })),
    );
    const accepted = results.filter((r) => r.status === 200);
    const refused = results.filter((r) => r.status !== 200);
    expect(accepted).toHaveLength(50);
    expect(refused.every((r) => r.status === 400 && r.body.code === 'insufficient_balance')).toBe(true);
    for (const r of accepted) await waitFor(() => txRow(s.ctx.db, r.body.transaction_id), (x) => x.stage === 3);
    expect(await balances(s.ctx.db, m.accountId)).toEqual({ available: 0, blocked: 0, pending: 0 });
    const postings = await s.ctx.db.query<{ kind: string; n: number }>(
      `SELECT lt.kind, count(*)::bigint AS n FROM ledger_transactions lt
         JOIN transactions t ON t.transaction_id = lt.reference WHERE t.account_id = $1 AND t.kind = 'cash_out'
        GROUP BY lt.kind ORDER BY lt.kind`,
      [m.accountId],
    );
    expect(postings).toEqual([
      { kind: 'cash_out_reserve', n: 50 },
      { kind: 'cash_out_settle', n: 50 },
    ]);
    const [rows] = await s.ctx.db.query<{ n: number }>(`SELECT count(*)::bigint AS n FROM transactions WHERE account_id = $1 AND kind = 'cash_out'`, [m.accountId]);
    expect(rows!.n).toBe(50);
    await expectLedgerConsistent(s.ctx.db);
  });

  it('20 concurrent repeats of one command (same external_id) make one order', async () => {
    const m = await merchantWithKey(s, { depositCents: 10_000 });
    const results = await Promise.all(
      Array.from({ length: 20 }, () => m.client.post('/pix/cash-out', { amount: 1000, pix_key: keys.settle, external_id: 'one-order' })),
    );
    expect(results.every((r) => r.status === 200)).toBe(true);
    expect(new Set(results.map((r) => r.body.transaction_id)).size).toBe(1);
    const id = results[0]!.body.transaction_id;
    await waitFor(() => txRow(s.ctx.db, id), (x) => x.stage === 3);
    expect(await balances(s.ctx.db, m.accountId)).toEqual({ available: 900_000, blocked: 0, pending: 0 });
    expect(await eventNames(s.ctx.db, id)).toEqual(['pix.payout.processing', 'pix.payout.confirmed']);
  });
});
