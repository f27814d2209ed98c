import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BACKENDS } from '../helpers/db.js';
import { merchantWithKey } from '../helpers/client.js';
import { balances, expectLedgerConsistent, foreignKey, txRow } from '../helpers/pix.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { recordStatements, type Statement } from '../helpers/statements.js';

/**
 * Issue 12: step 1 of a cash-out for an account this process has read before is ONE statement —
 * the checks run on the account's remembered configuration (fee, limits, holder) and the writing
 * statement lets the items through only if the account's figures under the locks and its row say
 * the same (src/pix/cashOut.ts, `reserveAssumed`). Whenever they do not, the account is read and
 * decided as before: a refusal, a repeat and a changed fee are answered from the read.
 */
const READ = 'read';
const WRITE = 'write';
/** Step 1's statements of a log, in order: the read of the accounts, the statement that writes. */
function reserveSteps(log: readonly Statement[]): string[] {
  return log.flatMap((st) => (/checked AS MATERIALIZED/.test(st.text) ? [WRITE] : /xmin::text AS version/.test(st.text) ? [READ] : []));
}

describe.each(BACKENDS)('cash-outs of an account this process knows, on %s', (backend) => {
  let s: TestServer;
  let receiver: string;
  beforeAll(async () => {
    s = await startTestServer({ backend, workers: false, env: { SIM_SETTLEMENT_MS: '60000' } });
    receiver = await foreignKey(s);
  });
  afterAll(async () => {
    await expectLedgerConsistent(s.ctx.db);
    await s?.close();
  });

  /** Sends the cash-out and returns its answer with step 1's statements. */
  async function cashOut(client: { post: (path: string, body: unknown) => Promise<{ status: number; body: any }> }, body: Record<string, unknown>) {
    const counter = recordStatements(s.ctx.db);
    try {
      const res = await client.post('/pix/cash-out', { pix_key: receiver, ...body });
      return { res, steps: reserveSteps(counter.log) };
    } finally {
      counter.stop();
    }
  }

  it('the first cash-out of an account reads it and writes; the next ones only write', async () => {
    const m = await merchantWithKey(s, { depositCents: 100_000 });
    const first = await cashOut(m.client, { amount: 1000 });
    expect(first.res.status).toBe(200);
    expect(first.steps).toEqual([READ, WRITE]);
    for (const amount of [2000, 3000]) {
      const next = await cashOut(m.client, { amount });
      expect(next.res.status).toBe(200);
      expect(next.steps).toEqual([WRITE]);
    }
    expect(await balances(s.ctx.db, m.accountId)).toEqual({ available: 10_000_000 - 600_000, blocked: 0, pending: 600_000 });
  });

  it('a fee the operator changed in between: the write finds the row changed, the account is read again, the record carries the new fee', async () => {
    const m = await merchantWithKey(s, { depositCents: 100_000 });
    expect((await cashOut(m.client, { amount: 1000 })).res.status).toBe(200);
    expect((await s.admin('PATCH', `/accounts/${m.accountId}`, { cash_out_fee_cents: 150 })).status).toBe(200);
    const changed = await cashOut(m.client, { amount: 1000 });
    expect(changed.res.status).toBe(200);
    expect(changed.res.body).toMatchObject({ amount: 100_000, fee_amount: 15_000, net_amount: 115_000 });
    expect(changed.steps).toEqual([WRITE, READ, WRITE]);
    expect((await txRow(s.ctx.db, changed.res.body.transaction_id)).fee_amount).toBe(15_000);
    // Remembered again from that read.
    const after = await cashOut(m.client, { amount: 1000 });
    expect(after.res.body.fee_amount).toBe(15_000);
    expect(after.steps).toEqual([WRITE]);
    expect(await balances(s.ctx.db, m.accountId)).toEqual({ available: 10_000_000 - 330_000, blocked: 0, pending: 330_000 });
  });

  it('a per-operation limit the operator lowered in between: the remembered one would pass, the read refuses', async () => {
    const m = await merchantWithKey(s, { depositCents: 100_000 });
    expect((await cashOut(m.client, { amount: 5000 })).res.status).toBe(200);
    expect((await s.admin('PATCH', `/accounts/${m.accountId}`, { cash_out_max_amount_cents: 4000 })).status).toBe(200);
    const over = await cashOut(m.client, { amount: 5000 });
    expect(over.res.status).toBe(422);
    expect(over.res.body).toMatchObject({ code: 'amount_limit_exceeded', detail: 'The maximum amount per cash-out is R$ 40,00' });
    expect(over.steps).toEqual([WRITE, READ]);
    expect(await balances(s.ctx.db, m.accountId)).toEqual({ available: 10_000_000 - 500_000, blocked: 0, pending: 500_000 });
  });

  it('a balance that no longer covers the cash-out: refused on a read, with its figures, and nothing written', async () => {
    const m = await merchantWithKey(s, { depositCents: 1000 });
    expect((await cashOut(m.client, { amount: 600 })).res.status).toBe(200);
    const short = await cashOut(m.client, { amount: 600, external_id: 'short' });
    expect(short.res.status).toBe(400);
    expect(short.res.body).toMatchObject({ code: 'insufficient_balance', detail: 'Available balance 40000 is below amount plus fee 60000 (base units)' });
    expect(short.steps).toEqual([WRITE, READ]);
    expect(await balances(s.ctx.db, m.accountId)).toEqual({ available: 40_000, blocked: 0, pending: 60_000 });
    expect((await m.client.get('/transactions/ref/short')).status).toBe(404);
  });

  it('a daily limit the usage under the locks would pass: refused on a read, with what remains', async () => {
    const m = await merchantWithKey(s, { depositCents: 100_000 });
    expect((await s.admin('PATCH', `/accounts/${m.accountId}`, { cash_out_daily_limit_cents: 9000 })).status).toBe(200);
    expect((await cashOut(m.client, { amount: 5000 })).res.status).toBe(200);
    const over = await cashOut(m.client, { amount: 4001 });
    expect(over.res.status).toBe(422);
    expect(over.res.body).toMatchObject({ code: 'daily_limit_exceeded', detail: 'Cash-outs are limited to R$ 90,00 per day (America/Sao_Paulo); R$ 40,00 remain' });
    expect(over.steps).toEqual([WRITE, READ]);
    const fits = await cashOut(m.client, { amount: 4000 });
    expect(fits.res.status).toBe(200);
    expect(fits.steps).toEqual([WRITE]);
  });

  it('an external_id the account already used: answered as the original order after a read, no second record', async () => {
    const m = await merchantWithKey(s, { depositCents: 100_000 });
    const original = await cashOut(m.client, { amount: 1000, external_id: 'once' });
    expect(original.res.status).toBe(200);
    const again = await cashOut(m.client, { amount: 1000, external_id: 'once' });
    expect(again.res.status).toBe(200);
    expect(again.res.body.transaction_id).toBe(original.res.body.transaction_id);
    expect(again.steps).toEqual([WRITE, READ]);
    const rows = await s.ctx.db.query('SELECT 1 FROM transactions WHERE account_id = $1 AND external_id = $2', [m.accountId, 'once']);
    expect(rows).toHaveLength(1);
    expect(await balances(s.ctx.db, m.accountId)).toEqual({ available: 10_000_000 - 100_000, blocked: 0, pending: 100_000 });
  });

  it('concurrent cash-outs of a known account beyond its balance: exactly those that fit are accepted, never an overdraft', async () => {
    const m = await merchantWithKey(s, { depositCents: 10_000 });
    expect((await cashOut(m.client, { amount: 1000 })).res.status).toBe(200);
    const answers = await Promise.all(Array.from({ length: 12 }, () => m.client.post('/pix/cash-out', { amount: 1000, pix_key: receiver })));
    // R$ 100,00 deposited, R$ 10,00 sent: nine more of R$ 10,00 fit.
    expect(answers.filter((r) => r.status === 200)).toHaveLength(9);
    expect(answers.filter((r) => r.status === 400).map((r) => r.body.code)).toEqual(Array(3).fill('insufficient_balance'));
    expect(await balances(s.ctx.db, m.accountId)).toEqual({ available: 0, blocked: 0, pending: 1_000_000 });
  });
});
