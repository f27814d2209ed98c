import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Database } from '../../src/db/db.js';
import { IdempotencyLostError } from '../../src/external/idempotency.js';
import { DomainError } from '../../src/errors/catalog.js';
import { domainErrorToHttp, statusOf } from '../../src/http/errorMap.js';
import { CASH_OUT_BATCH_MAX, cashOut, type CashOutAnswer, type CashOutKey } from '../../src/pix/cashOut.js';
import { parseCashOut } from '../../src/pix/cashOutCommand.js';
import { BACKENDS, schemaAccess } from '../helpers/db.js';
import { merchantWithKey, type MerchantFixture } from '../helpers/client.js';
import { balances, claimedCashOutKey, expectLedgerConsistent, foreignKey, SIM_FAST, txRow, waitFor } from '../helpers/pix.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { recordStatements } from '../helpers/statements.js';

/**
 * Issue 12: concurrent cash-outs of one process are coalesced into one transaction per batch,
 * whatever their accounts (src/pix/cashOut.ts, reserveInBatch). Each request still gets its own
 * answer or its own error, no account is ever overdrawn, a limit refusal or a repeat inside a batch
 * touches no other item.
 */
const NO_KEY: CashOutKey = { resumes: null, bind: async () => {}, record: async () => {}, claim: null, prepare: () => null };

type Outcome = { ok: true; answer: CashOutAnswer } | { ok: false; status: number; code: string };

const LOCKS = /^WITH locked AS MATERIALIZED/;

describe.each(BACKENDS)('cash-outs of one account in batches on %s', (backend) => {
  let s: TestServer;
  let receiver: string;
  beforeAll(async () => {
    s = await startTestServer({ backend, env: SIM_FAST });
    receiver = await foreignKey(s);
  });
  afterAll(async () => {
    await expectLedgerConsistent(s.ctx.db);
    await s?.close();
  });

  /** Cash-outs started together (in this order) on the account, straight through src/pix/cashOut.ts. */
  function together(m: MerchantFixture, bodies: Record<string, unknown>[]): Promise<Outcome[]> {
    return acrossAccounts(bodies.map((body) => [m, body]));
  }

  /** Cash-outs started together (in this order), each on its own account. */
  async function acrossAccounts(calls: [MerchantFixture, Record<string, unknown>][]): Promise<Outcome[]> {
    return Promise.all(
      calls.map(([m, body]) =>
        cashOut(s.ctx, { merchantId: m.merchantId, accountId: m.accountId }, parseCashOut({ pix_key: receiver, ...body }), NO_KEY).then(
          (answer): Outcome => ({ ok: true, answer }),
          (err: unknown): Outcome => {
            if (!(err instanceof DomainError)) throw err;
            return { ok: false, status: statusOf(err.code), code: err.code };
          },
        ),
      ),
    );
  }

  const cashOuts = (m: MerchantFixture) =>
    s.ctx.db.query<{ transaction_id: string; amount: number; external_id: string | null }>(
      `SELECT transaction_id, amount, external_id FROM transactions WHERE account_id = $1 AND kind = 'cash_out' ORDER BY created_at, transaction_id`,
      [m.accountId],
    );

  it('N concurrent cash-outs with a balance for K: exactly K accepted and debited, the others insufficient_balance, in fewer transactions than requests', async () => {
    const n = 40;
    const k = 15;
    const m = await merchantWithKey(s, { depositCents: k * 1000 + 999 });
    const counter = recordStatements(s.ctx.db);
    let outcomes: Outcome[];
    try {
      outcomes = await together(m, Array.from({ length: n }, () => ({ amount: 1000 })));
    } finally {
      counter.stop();
    }
    const locks = counter.log.filter((st) => LOCKS.test(st.text)).length;
    console.log(`${n} concurrent cash-outs of one account on ${backend}: ${locks} reserve transactions`);
    expect(locks).toBeLessThanOrEqual(n / 2);
    const accepted = outcomes.filter((o) => o.ok);
    expect(accepted).toHaveLength(k);
    expect(outcomes.filter((o) => !o.ok)).toEqual(Array.from({ length: n - k }, () => ({ ok: false, status: 400, code: 'insufficient_balance' })));
    // Arrival order decides (on PGlite, which answers the directory look-ups in order, that is the call order).
    if (backend === 'pglite') expect(outcomes.slice(0, k).every((o) => o.ok)).toBe(true);
    expect(new Set(accepted.map((o) => o.ok && o.answer.body.transaction_id)).size).toBe(k);
    expect(await cashOuts(m)).toHaveLength(k);
    for (const o of accepted) if (o.ok) await waitFor(() => txRow(s.ctx.db, o.answer.body.transaction_id), (r) => r.stage === 3);
    expect(await balances(s.ctx.db, m.accountId)).toEqual({ available: 999 * 100, blocked: 0, pending: 0 });
    const [reserves] = await s.ctx.db.query<{ n: number }>(
      `SELECT count(*)::bigint AS n FROM ledger_transactions lt JOIN transactions t ON t.transaction_id = lt.reference
        WHERE t.account_id = $1 AND lt.kind = 'cash_out_reserve'`,
      [m.accountId],
    );
    expect(reserves!.n).toBe(k);
    await expectLedgerConsistent(s.ctx.db);
  });

  it('cash-outs of several accounts share a batch: one lock statement and one commit for all, each account checked against its own balance, limits and external_ids', async () => {
    const rich = await merchantWithKey(s, { depositCents: 100_000 });
    const poor = await merchantWithKey(s, { depositCents: 2_500 });
    const limited = await merchantWithKey(s, { depositCents: 100_000 });
    await s.ctx.db.query('UPDATE accounts SET cash_out_max_amount_cents = 1500 WHERE id = $1', [limited.accountId]);
    const calls: [MerchantFixture, Record<string, unknown>][] = [
      [rich, { amount: 1000, external_id: 'same-id' }],
      [poor, { amount: 1000, external_id: 'same-id' }], // the same external_id on another account: its own order
      [limited, { amount: 2000 }], // above its per-operation limit
      [poor, { amount: 1000 }],
      [rich, { amount: 1000, external_id: 'same-id' }], // a repeat on the first account
      [poor, { amount: 1000 }], // the third: beyond the poor account's balance
      [limited, { amount: 1000 }],
    ];
    const counter = recordStatements(s.ctx.db);
    let outcomes: Outcome[];
    try {
      outcomes = await acrossAccounts(calls);
    } finally {
      counter.stop();
    }
    const locks = counter.log.filter((st) => LOCKS.test(st.text));
    console.log(`${calls.length} concurrent cash-outs of 3 accounts on ${backend}: ${locks.length} reserve transactions`);
    // On PGlite the directory answers in call order, so all seven reach the batcher in one turn; on
    // PostgreSQL the look-ups finish on several connections, so they may split into a few batches.
    if (backend === 'pglite') expect(locks.length).toBe(1);
    else expect(locks.length).toBeLessThan(calls.length);
    const summary = outcomes.map((o) => (o.ok ? o.answer.statusCode : o.code));
    expect([summary[0], summary[2], summary[4], summary[6]]).toEqual([200, 'amount_limit_exceeded', 200, 200]);
    // The poor account's three: two accepted, the one that came last (arrival order) refused.
    expect([summary[1], summary[3], summary[5]].sort()).toEqual([200, 200, 'insufficient_balance']);
    if (backend === 'pglite') expect(summary[5]).toBe('insufficient_balance');
    const ids = outcomes.map((o) => (o.ok ? o.answer.body.transaction_id : null));
    expect(ids[4]).toBe(ids[0]); // the repeat answers with the first order
    expect(ids[1]).not.toBe(ids[0]);
    expect((await cashOuts(rich)).map((r) => r.external_id)).toEqual(['same-id']);
    expect(await cashOuts(poor)).toHaveLength(2);
    expect((await cashOuts(limited)).map((r) => r.amount)).toEqual([1000 * 100]);
    for (const id of ids) if (id) await waitFor(() => txRow(s.ctx.db, id), (r) => r.stage === 3);
    expect(await balances(s.ctx.db, poor.accountId)).toEqual({ available: 500 * 100, blocked: 0, pending: 0 });
    expect(await balances(s.ctx.db, rich.accountId)).toEqual({ available: 99_000 * 100, blocked: 0, pending: 0 });
    await expectLedgerConsistent(s.ctx.db);
  });

  it('external_id repeats inside one batch: the same order answers as the first, another payload is a conflict, nothing is written twice', async () => {
    const m = await merchantWithKey(s, { depositCents: 100_000 });
    const [a, b] = [`a-${randomUUID()}`, `b-${randomUUID()}`];
    const outcomes = await together(m, [
      { amount: 1000, external_id: a },
      { amount: 1000, external_id: a },
      { amount: 2000, external_id: b },
      { amount: 3000, external_id: a },
      { amount: 1000, external_id: a },
      { amount: 500 },
    ]);
    const [, , other, , , plain] = outcomes;
    // The four with external_id a: whichever arrived first is the order (on PGlite the first one;
    // on PostgreSQL the directory look-ups answer in any order); the others with its payload are
    // that order again, the one with another payload a conflict.
    const withA = ([[0, 1000], [1, 1000], [3, 3000], [4, 1000]] as const).map(([i, amount]) => ({ amount, outcome: outcomes[i]! }));
    const winner = withA.find((x) => x.outcome.ok)!;
    const firstId = winner.outcome.ok && winner.outcome.answer.body.transaction_id;
    for (const x of withA) {
      if (x.amount === winner.amount) expect(x.outcome).toMatchObject({ ok: true, answer: { body: { transaction_id: firstId, external_id: a } } });
      else expect(x.outcome).toEqual({ ok: false, status: 409, code: 'external_id_conflict' });
    }
    if (backend === 'pglite') expect(winner.amount).toBe(1000);
    const aAmount = winner.amount * 100;
    expect(other).toMatchObject({ ok: true, answer: { body: { external_id: b, amount: 200_000 } } });
    expect(plain).toMatchObject({ ok: true, answer: { body: { external_id: null, amount: 50_000 } } });
    const rows = await cashOuts(m);
    expect(rows.map((r) => [r.external_id, r.amount]).sort()).toEqual([[a, aAmount], [b, 200_000], [null, 50_000]].sort());
    for (const r of rows) await waitFor(() => txRow(s.ctx.db, r.transaction_id), (x) => x.stage === 3);
    expect((await balances(s.ctx.db, m.accountId)).available).toBe(10_000_000 - aAmount - 250_000);
    // A repeat after the batch answers from the record.
    const [later] = await together(m, [{ amount: winner.amount, external_id: a }]);
    expect(later).toMatchObject({ ok: true, answer: { body: { transaction_id: firstId } } });
  });

  it('a limit refusal in a batch does not affect the others: per operation and daily limits checked against the running usage', async () => {
    const m = await merchantWithKey(s, { depositCents: 100_000 });
    expect((await s.admin('PATCH', `/accounts/${m.accountId}`, { cash_out_max_amount_cents: 5000, cash_out_daily_limit_cents: 2500, cash_out_nighttime_limit_cents: 2500 })).status).toBe(200);
    const outcomes = await together(m, [{ amount: 1000 }, { amount: 6000 }, { amount: 1000 }, { amount: 1000 }, { amount: 500 }]);
    const codes = outcomes.map((o) => (o.ok ? o.answer.statusCode : o.code));
    // Whatever the arrival order: 6000 breaks the per-operation limit; of 1000, 1000, 1000 and 500
    // against a daily 2500, the 500 and two of the 1000 fit and one 1000 is refused.
    expect(codes[1]).toBe('amount_limit_exceeded');
    expect(codes[4]).toBe(200);
    expect([codes[0], codes[2], codes[3]].filter((c) => c === 200)).toHaveLength(2);
    expect([codes[0], codes[2], codes[3]].filter((c) => c !== 200)).toEqual([expect.stringMatching(/^(daily|nighttime)_limit_exceeded$/)]);
    const rows = await cashOuts(m);
    expect(rows.map((r) => r.amount).sort()).toEqual([100_000, 100_000, 50_000].sort());
    for (const r of rows) await waitFor(() => txRow(s.ctx.db, r.transaction_id), (x) => x.stage === 3);
    expect((await balances(s.ctx.db, m.accountId)).available).toBe(10_000_000 - 250_000);
    const usage = await s.ctx.db.query<{ window_kind: string; amount: number }>('SELECT window_kind, amount FROM cash_out_usage WHERE account_id = $1', [m.accountId]);
    expect(usage.find((u) => u.window_kind === 'day')?.amount).toBe(250_000);
  });

  it('a request whose Idempotency-Key was taken over fails alone; the others of its batch are written once', async () => {
    const m = await merchantWithKey(s, { depositCents: 100_000 });
    const keys = await Promise.all(
      [0, 1, 2].map(() => claimedCashOutKey(s, m.merchantId, randomUUID())),
    );
    // The second request's key is taken over by another holder (its lease ran out).
    await s.ctx.db.query('UPDATE idempotency_keys SET owner_token = $2 WHERE id = $1', [keys[1]!.claim.id, randomUUID()]);
    const outcomes = await Promise.all(
      keys.map(({ key }, i) =>
        cashOut(s.ctx, { merchantId: m.merchantId, accountId: m.accountId }, parseCashOut({ amount: 1000 + i, pix_key: receiver }), key).then(
          (answer) => ({ ok: true as const, answer }),
          (err: unknown) => ({ ok: false as const, err }),
        ),
      ),
    );
    expect(outcomes[0]!.ok).toBe(true);
    expect(outcomes[2]!.ok).toBe(true);
    expect(outcomes[1]!.ok === false && (outcomes[1] as { err: Error }).err).toBeInstanceOf(IdempotencyLostError);
    expect((await cashOuts(m)).map((r) => r.amount).sort()).toEqual([100_000, 100_200]);
    const bound = await s.ctx.db.query<{ id: number; resource_id: string | null; status: string }>(
      'SELECT id, resource_id, status FROM idempotency_keys WHERE id = ANY($1::bigint[]) ORDER BY id',
      [keys.map((k) => k.claim.id)],
    );
    const byId = new Map(bound.map((b) => [Number(b.id), b]));
    expect(keys.map((k) => byId.get(k.claim.id)!).map((b) => [b.resource_id !== null, b.status])).toEqual([
      [true, 'completed'],
      [false, 'in_progress'],
      [true, 'completed'],
    ]);
    await waitFor(() => balances(s.ctx.db, m.accountId), (x) => x.pending === 0);
    expect((await balances(s.ctx.db, m.accountId)).available).toBe(10_000_000 - 200_200);
  });

  it('a batch is all or nothing: a failure while writing it fails every request in it and leaves nothing behind', async () => {
    const m = await merchantWithKey(s, { depositCents: 100_000 });
    const failing: CashOutKey = {
      ...NO_KEY,
      claim: undefined,
      bind: async () => {
        throw new Error('injected failure inside the batch transaction');
      },
    };
    const outcomes = await Promise.all(
      [NO_KEY, NO_KEY, failing, NO_KEY, NO_KEY].map((key, i) =>
        cashOut(s.ctx, { merchantId: m.merchantId, accountId: m.accountId }, parseCashOut({ amount: 1000 + i, pix_key: receiver }), key).then(
          (answer) => ({ ok: true as const, amount: answer.body.amount }),
          (err: Error) => ({ ok: false as const, message: err.message }),
        ),
      ),
    );
    expect(outcomes[2]).toEqual({ ok: false, message: 'injected failure inside the batch transaction' });
    const failed = outcomes.filter((o) => !o.ok);
    expect(failed.every((o) => !o.ok && o.message === 'injected failure inside the batch transaction')).toBe(true);
    const written = outcomes.filter((o) => o.ok).map((o) => (o.ok ? o.amount : 0));
    expect((await cashOuts(m)).map((r) => r.amount).sort()).toEqual(written.sort());
    await waitFor(() => balances(s.ctx.db, m.accountId), (x) => x.pending === 0);
    expect((await balances(s.ctx.db, m.accountId)).available).toBe(10_000_000 - written.reduce((a, b) => a + b, 0));
    const [usage] = await s.ctx.db.query<{ amount: number }>(`SELECT amount FROM cash_out_usage WHERE account_id = $1 AND window_kind = 'day'`, [m.accountId]);
    expect(usage?.amount ?? 0).toBe(written.reduce((a, b) => a + b, 0));
    await expectLedgerConsistent(s.ctx.db);
  });

  it(`a batch takes at most ${CASH_OUT_BATCH_MAX} cash-outs`, async () => {
    const n = CASH_OUT_BATCH_MAX * 2 + 10;
    const m = await merchantWithKey(s, { depositCents: n * 100 });
    const counter = recordStatements(s.ctx.db);
    let outcomes: Outcome[];
    try {
      outcomes = await together(m, Array.from({ length: n }, () => ({ amount: 100 })));
    } finally {
      counter.stop();
    }
    expect(outcomes.every((o) => o.ok)).toBe(true);
    const writes = counter.log.filter((st) => st.text.startsWith('WITH items AS MATERIALIZED'));
    expect(writes.length).toBeGreaterThanOrEqual(3);
    expect(await cashOuts(m)).toHaveLength(n);
  });
});

describe.skipIf(!BACKENDS.includes('postgres'))('cash-out batches of two processes on one account (PostgreSQL)', () => {
  let a: TestServer;
  let b: TestServer;
  let second: Database;
  let receiver: string;
  beforeAll(async () => {
    a = await startTestServer({ backend: 'postgres', env: SIM_FAST });
    const [{ schema }] = (await a.ctx.db.query<{ schema: string }>('SELECT current_schema() AS schema')) as [{ schema: string }];
    second = await schemaAccess(schema).open({ max: 10 });
    b = await startTestServer({ database: { db: second, backend: 'postgres', close: async () => {}, reopen: async () => { throw new Error('no'); } }, env: SIM_FAST, workers: false });
    receiver = await foreignKey(a);
  });
  afterAll(async () => {
    await expectLedgerConsistent(a.ctx.db);
    await b?.close();
    await second?.close();
    await a?.close();
  });

  it('the row lock orders the batches of two processes: the balance and the daily limit hold across both (a batch whose account changed is checked again under the locks)', async () => {
    const m = await merchantWithKey(a, { depositCents: 20 * 1000 });
    // Daily limit for 12 of them; the balance for 20.
    expect((await a.admin('PATCH', `/accounts/${m.accountId}`, { cash_out_daily_limit_cents: 12 * 1000, cash_out_nighttime_limit_cents: 12 * 1000 })).status).toBe(200);
    const counters = [recordStatements(a.ctx.db), recordStatements(second)];
    const results = await Promise.all(
      Array.from({ length: 60 }, (_, i) => {
        const server = i % 2 === 0 ? a : b;
        return cashOut(server.ctx, { merchantId: m.merchantId, accountId: m.accountId }, parseCashOut({ amount: 1000, pix_key: receiver }), NO_KEY).then(
          () => 'ok',
          (err: DomainError) => err.code,
        );
      }),
    );
    for (const c of counters) c.stop();
    const log = counters.flatMap((c) => c.log);
    const batches = log.filter((st) => st.tx === null && LOCKS.test(st.text)).length;
    const lockedAgain = new Set(log.filter((st) => st.tx !== null && LOCKS.test(st.text)).map((st) => st.tx)).size;
    console.log(`60 cash-outs of one account from two processes: ${batches} batches, ${lockedAgain} of them (or parts) checked again under the locks`);
    expect(results.filter((r) => r === 'ok')).toHaveLength(12);
    expect(results.filter((r) => r !== 'ok').every((r) => /^(daily|nighttime)_limit_exceeded$/.test(r))).toBe(true);
    const [count] = await a.ctx.db.query<{ n: number }>(`SELECT count(*)::bigint AS n FROM transactions WHERE account_id = $1 AND kind = 'cash_out'`, [m.accountId]);
    expect(count!.n).toBe(12);
    const [usage] = await a.ctx.db.query<{ amount: number }>(`SELECT amount FROM cash_out_usage WHERE account_id = $1 AND window_kind = 'day'`, [m.accountId]);
    expect(usage!.amount).toBe(12 * 100_000);
    await waitFor(() => balances(a.ctx.db, m.accountId), (x) => x.pending === 0);
    expect(await balances(a.ctx.db, m.accountId)).toEqual({ available: 8 * 100_000, blocked: 0, pending: 0 });
  });
});

/**
 * A batch is checked on a read without locks and written by one statement that writes only the
 * accounts whose figures are still those the checks saw (repository.reserveCashOutsIfUnchanged).
 * Here something changes between the read and that statement (injected just before it is sent):
 * the account's items are checked again under the locks, and what the change did counts.
 */
describe.each(BACKENDS)('a batch whose accounts change between its read and its write on %s', (backend) => {
  let s: TestServer;
  let receiver: string;
  beforeAll(async () => {
    s = await startTestServer({ backend, env: SIM_FAST });
    receiver = await foreignKey(s);
  });
  afterAll(async () => {
    await expectLedgerConsistent(s.ctx.db);
    await s?.close();
  });

  /** Runs `change` just before the next write-if-unchanged statement; counts the batches checked again under the locks. */
  function beforeWrite(change: () => Promise<void>): { lockedAgain: () => number; stop: () => void } {
    const db = s.ctx.db;
    const query = db.query;
    let pending = true;
    const counter = recordStatements(db);
    db.query = (async (text: string, params?: readonly unknown[]) => {
      if (pending && text.includes('checked AS MATERIALIZED')) {
        pending = false;
        await change();
      }
      return query.call(db, text, params);
    }) as Database['query'];
    return {
      lockedAgain: () => counter.log.filter((st) => st.tx !== null && LOCKS.test(st.text)).length,
      stop() {
        counter.stop();
        db.query = query;
      },
    };
  }

  const run = (m: MerchantFixture, body: Record<string, unknown>, key: CashOutKey = NO_KEY, ctx = s.ctx) =>
    cashOut(ctx, { merchantId: m.merchantId, accountId: m.accountId }, parseCashOut({ pix_key: receiver, ...body }), key).then(
      (answer) => ({ ok: true as const, answer }),
      (err: unknown) => ({ ok: false as const, err }),
    );

  it('a credit between them: the refusal the read would have made is not made, both are accepted against the new balance', async () => {
    const m = await merchantWithKey(s, { depositCents: 1_000 });
    // The read sees 1,000: the first 800 fits, the second not. The deposit lands before the write.
    const hook = beforeWrite(async () => {
      expect((await s.admin('POST', `/accounts/${m.accountId}/deposits`, { amount: 1_000 })).status).toBe(201);
    });
    let outcomes;
    try {
      outcomes = await Promise.all([run(m, { amount: 800 }), run(m, { amount: 800 })]);
      expect(hook.lockedAgain()).toBeGreaterThanOrEqual(1);
    } finally {
      hook.stop();
    }
    expect(outcomes.map((o) => o.ok)).toEqual([true, true]);
    const rows = await s.ctx.db.query<{ amount: number }>(`SELECT amount FROM transactions WHERE account_id = $1 AND kind = 'cash_out'`, [m.accountId]);
    expect(rows.map((r) => r.amount)).toEqual([80_000, 80_000]);
    await waitFor(() => balances(s.ctx.db, m.accountId), (x) => x.pending === 0);
    expect(await balances(s.ctx.db, m.accountId)).toEqual({ available: 40_000, blocked: 0, pending: 0 });
  });

  it('a debit between them: what the read accepted is refused under the locks, nothing is overdrawn', async () => {
    const m = await merchantWithKey(s, { depositCents: 1_000 });
    // The read sees 1,000 and accepts 600; another process's cash-out of 700 commits before the write.
    const hook = beforeWrite(async () => {
      const other = await run(m, { amount: 700 }, NO_KEY, { ...s.ctx }); // another context: a batcher of its own, as another process
      expect(other.ok).toBe(true);
    });
    let outcome;
    try {
      outcome = await run(m, { amount: 600 });
      expect(hook.lockedAgain()).toBeGreaterThanOrEqual(1);
    } finally {
      hook.stop();
    }
    // The spec's error, with the balance as the locks found it (300.00 after the other debit), not as the read saw it.
    expect(outcome.ok === false && outcome.err instanceof DomainError && [statusOf(outcome.err.code), domainErrorToHttp(outcome.err, 'operation').body]).toEqual([
      400,
      { worked: false, errors: { insufficient_balance: 'Balance below amount plus fee' }, code: 'insufficient_balance', detail: 'Available balance 30000 is below amount plus fee 60000 (base units)' },
    ]);
    const rows = await s.ctx.db.query<{ amount: number }>(`SELECT amount FROM transactions WHERE account_id = $1 AND kind = 'cash_out'`, [m.accountId]);
    expect(rows.map((r) => r.amount)).toEqual([70_000]);
    await waitFor(() => balances(s.ctx.db, m.accountId), (x) => x.pending === 0);
    expect(await balances(s.ctx.db, m.accountId)).toEqual({ available: 30_000, blocked: 0, pending: 0 });
  });

  it('a debit between them that leaves enough: every item was accepted and still fits, so the one statement writes them (nothing checked again)', async () => {
    const m = await merchantWithKey(s, { depositCents: 2_000 });
    const hook = beforeWrite(async () => {
      expect((await run(m, { amount: 700 }, NO_KEY, { ...s.ctx })).ok).toBe(true);
    });
    let outcomes;
    try {
      outcomes = await Promise.all([run(m, { amount: 600 }), run(m, { amount: 600 })]);
      expect(hook.lockedAgain()).toBe(0);
    } finally {
      hook.stop();
    }
    expect(outcomes.map((o) => o.ok)).toEqual([true, true]);
    await waitFor(() => balances(s.ctx.db, m.accountId), (x) => x.pending === 0);
    expect(await balances(s.ctx.db, m.accountId)).toEqual({ available: 10_000, blocked: 0, pending: 0 });
    const [usage] = await s.ctx.db.query<{ amount: number }>(`SELECT amount FROM cash_out_usage WHERE account_id = $1 AND window_kind = 'day'`, [m.accountId]);
    expect(usage!.amount).toBe(190_000);
  });

  it('the daily limit used up between them: the accepted items no longer fit, they are checked again under the locks and the one past the limit is refused', async () => {
    const m = await merchantWithKey(s, { depositCents: 10_000 });
    expect((await s.admin('PATCH', `/accounts/${m.accountId}`, { cash_out_daily_limit_cents: 2_000, cash_out_nighttime_limit_cents: 2_000 })).status).toBe(200);
    const hook = beforeWrite(async () => {
      expect((await run(m, { amount: 1_000 }, NO_KEY, { ...s.ctx })).ok).toBe(true);
    });
    let outcomes;
    try {
      outcomes = await Promise.all([run(m, { amount: 600 }), run(m, { amount: 600 })]);
      expect(hook.lockedAgain()).toBeGreaterThanOrEqual(1);
    } finally {
      hook.stop();
    }
    const codes = outcomes.map((o) => (o.ok ? 200 : o.err instanceof DomainError && o.err.code));
    expect(codes[0]).toBe(200);
    expect(codes[1]).toMatch(/^(daily|nighttime)_limit_exceeded$/);
    const [usage] = await s.ctx.db.query<{ amount: number }>(`SELECT amount FROM cash_out_usage WHERE account_id = $1 AND window_kind = 'day'`, [m.accountId]);
    expect(usage!.amount).toBe(160_000);
  });

  it('the same external_id taken between them: the statement writes nothing, the request answers with the order that took it', async () => {
    const m = await merchantWithKey(s, { depositCents: 10_000 });
    const externalId = `ext-${randomUUID()}`;
    let first: Awaited<ReturnType<typeof run>> | undefined;
    const hook = beforeWrite(async () => {
      first = await run(m, { amount: 1000, external_id: externalId }, NO_KEY, { ...s.ctx });
    });
    let second;
    try {
      second = await run(m, { amount: 1000, external_id: externalId });
      expect(hook.lockedAgain()).toBeGreaterThanOrEqual(1);
    } finally {
      hook.stop();
    }
    expect(first?.ok && second.ok).toBe(true);
    expect(second.ok && second.answer.body.transaction_id).toBe(first?.ok && first.answer.body.transaction_id);
    const rows = await s.ctx.db.query<{ amount: number }>(`SELECT amount FROM transactions WHERE account_id = $1 AND kind = 'cash_out'`, [m.accountId]);
    expect(rows).toHaveLength(1);
    await waitFor(() => balances(s.ctx.db, m.accountId), (x) => x.pending === 0);
    expect((await balances(s.ctx.db, m.accountId)).available).toBe(1_000_000 - 100_000);
  });

  it('an Idempotency-Key taken over between them: that request fails alone, nothing is bound to it, the other of its account is written once', async () => {
    const m = await merchantWithKey(s, { depositCents: 10_000 });
    const keys = await Promise.all([0, 1].map(() => claimedCashOutKey(s, m.merchantId, randomUUID())));
    const hook = beforeWrite(async () => {
      await s.ctx.db.query('UPDATE idempotency_keys SET owner_token = $2 WHERE id = $1', [keys[1]!.claim.id, randomUUID()]);
    });
    let outcomes;
    try {
      outcomes = await Promise.all(keys.map(({ key }, i) => run(m, { amount: 1000 + i }, key)));
    } finally {
      hook.stop();
    }
    expect(outcomes[0]!.ok).toBe(true);
    expect(outcomes[1]!.ok === false && outcomes[1]!.err).toBeInstanceOf(IdempotencyLostError);
    const rows = await s.ctx.db.query<{ amount: number }>(`SELECT amount FROM transactions WHERE account_id = $1 AND kind = 'cash_out'`, [m.accountId]);
    expect(rows.map((r) => r.amount)).toEqual([100_000]);
    const [taken] = await s.ctx.db.query<{ resource_id: string | null }>('SELECT resource_id FROM idempotency_keys WHERE id = $1', [keys[1]!.claim.id]);
    expect(taken!.resource_id).toBeNull();
    await waitFor(() => balances(s.ctx.db, m.accountId), (x) => x.pending === 0);
    expect((await balances(s.ctx.db, m.accountId)).available).toBe(1_000_000 - 100_000);
  });
});
