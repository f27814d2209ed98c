import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BACKENDS } from '../helpers/db.js';
import { addPixKey, merchantWithKey, type MerchantFixture } from '../helpers/client.js';
import { balances, eventNames, expectLedgerConsistent, foreignKey, sandbox, txRow, waitFor } from '../helpers/pix.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

/**
 * Money is conserved: random sequences of deposits, inbound PIX, paid cash-in charges, cash-outs
 * (settled, rejected, held then decided, returned), refunds (settled, failed) and MED infractions
 * (blocks, short blocks topped up by later credits, refunds, releases) and TEFs between the two
 * accounts end with every book equal to
 * its entries, the ledger summing to zero, nothing left pending, and each account's available and
 * blocked balances equal to what a model of the answers predicts.
 */

type Command =
  | { op: 'deposit'; acct: number; cents: number }
  | { op: 'inbound'; acct: number; cents: number }
  | { op: 'cashOut'; acct: number; cents: number; behavior: 'settle' | 'reject' | 'hold' }
  | { op: 'decide'; pick: number; decision: 'settle' | 'reject' }
  | { op: 'returnPayout'; pick: number; cents: number | null }
  | { op: 'refund'; pick: number; cents: number | null; code: 'MD06' | 'BE08' | 'XX99' }
  | { op: 'charge'; acct: number; cents: number }
  /** A cash-out of everything available, then (`dispute`) an infraction against one of the account's PIX: its block is short. */
  | { op: 'drain'; acct: number; dispute: boolean; pick: number }
  /** `percent`: the claimed share of what is left of the payment (above 100 is refused); null: all of it. */
  | { op: 'infraction'; pick: number; percent: number | null }
  | { op: 'resolve'; pick: number; decision: 'accepted' | 'rejected' | 'cancelled' }
  /** A TEF from `acct` to the other account, by its PIX key. */
  | { op: 'tef'; acct: number; cents: number };

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
  { arbitrary: fc.record({ op: fc.constant('charge' as const), acct, cents }), weight: 2 },
  { arbitrary: fc.record({ op: fc.constant('drain' as const), acct, dispute: fc.boolean(), pick: fc.nat() }), weight: 2 },
  { arbitrary: fc.record({ op: fc.constant('infraction' as const), pick: fc.nat(), percent: fc.option(fc.integer({ min: 1, max: 110 }), { nil: null }) }), weight: 5 },
  {
    arbitrary: fc.record({ op: fc.constant('resolve' as const), pick: fc.nat(), decision: fc.constantFrom('accepted' as const, 'rejected' as const, 'cancelled' as const) }),
    weight: 3,
  },
  { arbitrary: fc.record({ op: fc.constant('tef' as const), acct, cents }), weight: 3 },
);
/** Each run starts by funding both accounts with a random amount (cents, possibly 0; small enough that MED blocks are often short). */
const funding = fc.tuple(fc.integer({ min: 0, max: 30_000 }), fc.integer({ min: 0, max: 30_000 }));

/**
 * A fixed sequence run before the random ones, so every run covers the MED cases the random walk
 * reaches only sometimes: a block short of its claim (the account drained), topped up by later
 * credits (a PIX, a deposit, a paid charge), a voluntary refund refused by rule 5, a partial MED
 * refund, and each decision.
 */
const MED_EXAMPLE: [Command[], [number, number], [number, number]] = [
  [
    { op: 'inbound', acct: 0, cents: 5000 },
    { op: 'charge', acct: 0, cents: 3000 },
    { op: 'drain', acct: 0, dispute: true, pick: 0 },
    { op: 'inbound', acct: 0, cents: 2000 },
    { op: 'deposit', acct: 0, cents: 1000 },
    { op: 'infraction', pick: 1, percent: 50 },
    { op: 'refund', pick: 0, cents: 100, code: 'MD06' },
    { op: 'resolve', pick: 0, decision: 'accepted' },
    { op: 'charge', acct: 0, cents: 4000 },
    { op: 'resolve', pick: 0, decision: 'rejected' },
    { op: 'inbound', acct: 1, cents: 3000 },
    { op: 'cashOut', acct: 1, cents: 2500, behavior: 'hold' },
    { op: 'infraction', pick: 4, percent: null },
    { op: 'decide', pick: 0, decision: 'reject' },
    { op: 'resolve', pick: 0, decision: 'cancelled' },
    { op: 'infraction', pick: 3, percent: 110 },
    { op: 'infraction', pick: 3, percent: 20 },
    { op: 'infraction', pick: 3, percent: 20 },
    { op: 'resolve', pick: 0, decision: 'accepted' },
  ],
  [10, 20],
  [0, 500],
];

describe.each(BACKENDS)('money conservation on %s', (backend) => {
  let s: TestServer;
  let keys: Record<'settle' | 'reject' | 'hold', string>;
  beforeAll(async () => {
    s = await startTestServer({ backend, env: { SIM_SETTLEMENT_MS: '10', SIM_PROTECTION_MS: '50' } });
    keys = { settle: await foreignKey(s), reject: await foreignKey(s, { behavior: 'reject' }), hold: await foreignKey(s, { behavior: 'hold' }) };
  });
  afterAll(async () => s?.close());

  const settledOf = (id: string) => waitFor(() => txRow(s.ctx.db, id), (r) => r.stage === 3 || (r.stage === 2 && r.held_at !== null));

  it('random deposits, inbound PIX, paid charges, cash-outs, returns, refunds and MED infractions keep every balance equal to the model and the ledger at zero', async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(command, { minLength: 8, maxLength: 30 }), fc.tuple(fc.integer({ min: 0, max: 300 }), fc.integer({ min: 0, max: 300 })), funding, async (cmds, fees, fund) => {
        const accounts: MerchantFixture[] = [await merchantWithKey(s, { depositCents: fund[0] }), await merchantWithKey(s, { depositCents: fund[1] })];
        const pixKeys: string[] = [];
        for (const a of accounts) pixKeys.push(await addPixKey(s, a.accountId, 'evp'));
        const expected = [fund[0] * 100, fund[1] * 100];
        // Open infractions in the order they were reported, with what the model expects blocked.
        const open: { acct: number; id: string; original: string; amount: number; blocked: number }[] = [];
        /** A credit to the available balance tops up the account's short blocks, oldest first. */
        const credit = (i: number, amount: number) => {
          expected[i]! += amount;
          for (const inf of open) {
            if (inf.acct !== i) continue;
            const take = Math.min(expected[i]!, inf.amount - inf.blocked);
            expected[i]! -= take;
            inf.blocked += take;
          }
        };
        for (const [i, a] of accounts.entries()) await s.admin('PATCH', `/accounts/${a.accountId}`, { cash_out_fee_cents: fees[i], cash_in_fee_cents: fees[1 - i] });
        const inFee = (i: number) => fees[1 - i]! * 100;
        const outFee = (i: number) => fees[i]! * 100;
        const held: { acct: number; id: string; total: number }[] = [];
        const returnable: { acct: number; id: string; left: number }[] = [];
        const refundable: { acct: number; id: string; e2e: string; left: number }[] = [];
        const ids: string[] = [];

        for (const c of cmds) {
          switch (c.op) {
            case 'deposit': {
              const res = await s.admin('POST', `/accounts/${accounts[c.acct]!.accountId}/deposits`, { amount: c.cents });
              expect(res.status).toBe(201);
              credit(c.acct, c.cents * 100);
              break;
            }
            case 'inbound': {
              const res = await sandbox(s, 'POST', '/pix/inbound', { account_id: accounts[c.acct]!.accountId, amount: c.cents });
              expect(res.status).toBe(201);
              credit(c.acct, c.cents * 100 - Math.min(inFee(c.acct), c.cents * 100));
              refundable.push({ acct: c.acct, id: res.body.transaction_id, e2e: res.body.end_to_end_id, left: c.cents * 100 });
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
              if (c.decision === 'reject') credit(h!.acct, h!.total);
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
                credit(r.acct, value);
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
              if (open.some((i) => i.original === r.id)) {
                expect(res.status).toBe(422); // refund rule 5: the MED flow refunds it
                break;
              }
              if (res.status === 422) break; // over the original, or the safe balance is short
              expect(res.status).toBe(202);
              ids.push(res.body.transaction_id);
              const row = await waitFor(() => txRow(s.ctx.db, res.body.transaction_id), (x) => x.stage === 3);
              if (c.code === 'XX99') {
                expect(row.payment_status).toBe('failed');
                // Reserved, then released: a credit, which tops up short blocks first.
                expected[r.acct]! -= res.body.amount;
                credit(r.acct, res.body.amount);
              } else {
                expect(row.payment_status).toBe('settled');
                expected[r.acct]! -= res.body.amount;
                r.left -= res.body.amount;
              }
              break;
            }
            case 'drain': {
              const all = Math.floor((expected[c.acct]! - outFee(c.acct)) / 100);
              if (all <= 0) break;
              const res = await accounts[c.acct]!.client.post('/pix/cash-out', { amount: all, pix_key: keys.settle });
              expect(res.status).toBe(200);
              ids.push(res.body.transaction_id);
              await settledOf(res.body.transaction_id);
              expected[c.acct]! -= all * 100 + outFee(c.acct);
              returnable.push({ acct: c.acct, id: res.body.transaction_id, left: all * 100 });
              const disputable = refundable.filter((r) => r.acct === c.acct && r.left > 0 && !open.some((i) => i.original === r.id));
              if (!c.dispute || disputable.length === 0) break;
              const r = disputable[c.pick % disputable.length]!;
              const reported = await sandbox(s, 'POST', '/infractions', { end_to_end_id: r.e2e });
              expect(reported.status).toBe(201);
              open.push({ acct: r.acct, id: reported.body.id, original: r.id, amount: r.left, blocked: 0 });
              credit(r.acct, 0);
              expect(reported.body.blocked_amount).toBe(open.at(-1)!.blocked);
              break;
            }
            case 'charge': {
              const charge = await accounts[c.acct]!.client.post('/pix/cash-in', { amount: c.cents });
              expect(charge.status).toBe(201);
              const paid = await sandbox(s, 'POST', '/pix/pay', { emv: charge.body.emv });
              expect(paid.status).toBe(201);
              expect(paid.body.charge).toEqual({ transaction_id: charge.body.transaction_id, status: 'paid' });
              credit(c.acct, c.cents * 100 - Math.min(inFee(c.acct), c.cents * 100));
              refundable.push({ acct: c.acct, id: charge.body.transaction_id, e2e: paid.body.end_to_end_id, left: c.cents * 100 });
              break;
            }
            case 'infraction': {
              if (refundable.length === 0) break;
              const r = refundable[c.pick % refundable.length]!;
              const claimedCents = c.percent === null ? null : Math.max(1, Math.floor((r.left / 100) * c.percent / 100));
              const amount = claimedCents === null ? r.left : claimedCents * 100;
              const res = await sandbox(s, 'POST', '/infractions', { end_to_end_id: r.e2e, ...(claimedCents === null ? {} : { amount: claimedCents }) });
              if (open.some((i) => i.original === r.id)) {
                expect(res.status).toBe(409);
              } else if (r.left === 0 || amount > r.left) {
                expect(res.status).toBe(422);
              } else {
                expect(res.status).toBe(201);
                open.push({ acct: r.acct, id: res.body.id, original: r.id, amount, blocked: 0 });
                credit(r.acct, 0); // blocks what the available balance has
                expect(res.body.blocked_amount).toBe(open.at(-1)!.blocked);
              }
              break;
            }
            case 'tef': {
              const to = 1 - c.acct;
              const res = await accounts[c.acct]!.client.post('/tef/transfers', { amount: c.cents, pix_key: pixKeys[to] });
              if (c.cents * 100 > expected[c.acct]!) {
                expect(res.status).toBe(422);
                expect(res.body.code).toBe('insufficient_balance');
                expect(await eventNames(s.ctx.db, res.body.transaction_id)).toEqual(['tef.transfer.failed']);
                break;
              }
              expect(res.status).toBe(200);
              expect(await eventNames(s.ctx.db, res.body.transaction_id)).toEqual(['tef.transfer.sent']);
              expected[c.acct]! -= c.cents * 100;
              credit(to, c.cents * 100); // a TEF credit tops up the destination's short blocks too
              break;
            }
            case 'resolve': {
              if (open.length === 0) break;
              const [inf] = open.splice(c.pick % open.length, 1);
              const res = await sandbox(s, 'POST', `/infractions/${inf!.id}/resolve`, { decision: c.decision });
              expect(res.status).toBe(200);
              if (c.decision === 'accepted' && inf!.blocked > 0) {
                expect(res.body.refund.amount).toBe(inf!.blocked);
                await waitFor(() => txRow(s.ctx.db, res.body.refund.transaction_id), (x) => x.stage === 3 && x.status === 1);
                refundable.find((r) => r.id === inf!.original)!.left -= inf!.blocked;
              } else {
                credit(inf!.acct, inf!.blocked); // released
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
          const blocked = open.filter((inf) => inf.acct === i).reduce((sum, inf) => sum + inf.blocked, 0);
          expect(await balances(s.ctx.db, a.accountId)).toEqual({ available: expected[i], blocked, pending: 0 });
        }
        await expectLedgerConsistent(s.ctx.db);
      }),
      { numRuns: 10, seed: Number(process.env.FC_SEED ?? Date.now() % 100000), verbose: 1, examples: [MED_EXAMPLE] },
    );
  }, 120_000);

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

  it('concurrent TEFs in both directions between two accounts never deadlock, overdraw or lose money', async () => {
    const a = await merchantWithKey(s, { depositCents: 10_000 });
    const b = await merchantWithKey(s, { depositCents: 10_000 });
    const keyA = await addPixKey(s, a.accountId, 'evp');
    const keyB = await addPixKey(s, b.accountId, 'evp');
    const results = await Promise.all(
      Array.from({ length: 40 }, (_, i) => (i % 2 === 0 ? a.client.post('/tef/transfers', { amount: 700, pix_key: keyB }) : b.client.post('/tef/transfers', { amount: 900, pix_key: keyA }))),
    );
    expect(results.every((r) => r.status === 200 || (r.status === 422 && r.body.code === 'insufficient_balance'))).toBe(true);
    const sent = (i: number) => results.filter((r, j) => j % 2 === i && r.status === 200).length;
    const moved = sent(0) * 70_000 - sent(1) * 90_000;
    const [ba, bb] = [await balances(s.ctx.db, a.accountId), await balances(s.ctx.db, b.accountId)];
    expect(ba.available).toBe(1_000_000 - moved);
    expect(bb.available).toBe(1_000_000 + moved);
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
