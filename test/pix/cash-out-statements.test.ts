import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cashOut } from '../../src/pix/cashOut.js';
import { parseCashOut } from '../../src/pix/cashOutCommand.js';
import type { SimulatedRail } from '../../src/rail/sim/simulatedRail.js';
import { BACKENDS } from '../helpers/db.js';
import { merchantWithKey, type MerchantFixture } from '../helpers/client.js';
import { claimedCashOutKey, expectLedgerConsistent, foreignKey, txRow, waitFor } from '../helpers/pix.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { recordStatements, summarize, type Statement } from '../helpers/statements.js';

/**
 * Issue 12: the database round trips of one cash-out, counted statement by statement (a count is
 * deterministic; timings are not). BEGIN and COMMIT count: each is a round trip on PostgreSQL.
 * The figures are the contract of the money path: a change that adds a round trip fails here.
 *
 *   lookups   before the reserve transaction: the directory (and the owner check of a key of
 *             this institution, not taken here)
 *   reserve   step 1's transaction
 *   send      step 2, the rail call (the simulator's own statements)
 *   record    step 3 (acknowledgement, outbox event, idempotency answer)
 *   settle    the simulator's engine: the settlement and its notification applied by the service
 */
const EXPECTED = {
  lookups: 1, // was 1
  reserve: 2, // was 9 (BEGIN, lock books, read external_id, read holder, usage upsert, insert record, ledger, bind key, COMMIT), then 4 (BEGIN, lock and read, write, COMMIT): now the read, then one statement that locks and writes if nothing changed, outside a transaction
  send: 1, // was 3: directory entry, insert payment, read stall switch
  record: 1, // was 5: BEGIN, mark sent, outbox event, idempotency answer, COMMIT
  settle: 5, // was 20, then 9, then 8 (the claim of the settlement's notification: now leased by the statement that queues it), then 7 (the delivery batch's transaction, even of one: BEGIN, lock record, inbox + settlement, COMMIT): now the record read, then one statement that locks and writes, outside a transaction
};

/** Splits the statements of one cash-out into its steps (they run one after another). */
function steps(statements: Statement[]) {
  // Step 1 begins with the read of the account's books and ends where the rail's statements
  // (tables sim_*) begin.
  const reserveStart = statements.findIndex((s) => /\bledger_accounts\b/.test(s.text));
  const afterReserve = statements.findIndex((s, i) => i > reserveStart && /\bsim_/.test(s.text));
  const rest = statements.slice(afterReserve);
  // The rail's statements are the simulator's (tables sim_*); what follows them is step 3.
  const recordStart = rest.findLastIndex((s) => /\bsim_/.test(s.text)) + 1;
  return {
    lookups: statements.slice(0, reserveStart),
    reserve: statements.slice(reserveStart, afterReserve),
    send: rest.slice(0, recordStart),
    record: rest.slice(recordStart),
  };
}

describe.each(BACKENDS)('round trips of one cash-out on %s', (backend) => {
  let s: TestServer;
  let m: MerchantFixture;
  let receiver: string;
  beforeAll(async () => {
    // No background workers: the only statements are the ones of the cash-out.
    s = await startTestServer({ backend, workers: false, env: { SIM_SETTLEMENT_MS: '0', SIM_SEED: '7' } });
    m = await merchantWithKey(s, { depositCents: 1_000_000 });
    receiver = await foreignKey(s);
  });
  afterAll(async () => {
    await expectLedgerConsistent(s.ctx.db);
    await s?.close();
  });

  it('each step of a cash-out under an Idempotency-Key, and its settlement, in the counted statements', async () => {
    const { key } = await claimedCashOutKey(s, m.merchantId);
    const command = parseCashOut({ amount: 1000, pix_key: receiver, external_id: `ext-${randomUUID()}` });
    const counter = recordStatements(s.ctx.db);
    try {
      const answer = await cashOut(s.ctx, { merchantId: m.merchantId, accountId: m.accountId }, command, key);
      expect(answer.statusCode).toBe(200);
      const byStep = steps(counter.take());
      await (s.ctx.rail as unknown as SimulatedRail).tick();
      const settle = counter.take();
      expect((await txRow(s.ctx.db, answer.body.transaction_id)).stage).toBe(3);
      const counted = {
        lookups: byStep.lookups.length,
        reserve: byStep.reserve.length,
        send: byStep.send.length,
        record: byStep.record.length,
        settle: settle.length,
      };
      const detail = Object.entries({ ...byStep, settle }).map(([step, list]) => `${step}: ${list.length}\n  ${summarize(list).text.join('\n  ')}`);
      console.log(`round trips of one cash-out on ${backend}\n${detail.join('\n')}`);
      expect(counted).toEqual(EXPECTED);
    } finally {
      counter.stop();
    }
  });

  it('end to end over HTTP (signed, with Idempotency-Key): the pipeline adds its own statements before the cash-out', async () => {
    const counter = recordStatements(s.ctx.db);
    try {
      const res = await m.client.post('/pix/cash-out', { amount: 1000, pix_key: receiver }, { idempotencyKey: randomUUID() });
      expect(res.status).toBe(200);
      const all = counter.take();
      const cashOutSteps = EXPECTED.lookups + EXPECTED.reserve + EXPECTED.send + EXPECTED.record;
      console.log(`one signed cash-out over HTTP on ${backend}: ${all.length} statements before the answer (${cashOutSteps} of the cash-out)\n  ${summarize(all).text.join('\n  ')}`);
      expect(all.length).toBeGreaterThanOrEqual(cashOutSteps);
    } finally {
      counter.stop();
    }
  });
});

describe.each(BACKENDS)('the rail simulator wakes when work is due instead of polling on %s', (backend) => {
  let s: TestServer;
  let m: MerchantFixture;
  let receiver: string;
  beforeAll(async () => {
    s = await startTestServer({ backend, env: { SIM_SETTLEMENT_MS: '300', SIM_SEED: '7' } });
    m = await merchantWithKey(s, { depositCents: 1_000_000 });
    receiver = await foreignKey(s);
  });
  afterAll(async () => s?.close());

  const simStatements = (log: Statement[]) => log.filter((st) => /sim_(payments|notifications)/.test(st.text));

  it('idle, the engine looks for work about once a second (it polled every 50 ms with 4 statements)', async () => {
    const counter = recordStatements(s.ctx.db);
    try {
      await new Promise((r) => setTimeout(r, 3000));
    } finally {
      counter.stop();
    }
    const engine = simStatements(counter.log);
    console.log(`rail simulator idle for 3 s on ${backend}: ${engine.length} statements`);
    expect(engine.length).toBeLessThanOrEqual(10);
  });

  it('a payment taken wakes the engine when it falls due (SIM_SETTLEMENT_MS): settled without polling in between', async () => {
    const counter = recordStatements(s.ctx.db);
    try {
      const res = await m.client.post('/pix/cash-out', { amount: 1000, pix_key: receiver });
      expect(res.status).toBe(200);
      await waitFor(() => txRow(s.ctx.db, res.body.transaction_id), (r) => r.stage === 3);
    } finally {
      counter.stop();
    }
    // Looks for due work: at the wake-up, perhaps once by the safety net; a 50 ms poll made six.
    const looks = counter.log.filter((st) => /\bdue AS \(/.test(st.text));
    expect(looks.length).toBeGreaterThanOrEqual(1);
    expect(looks.length).toBeLessThanOrEqual(3);
  });
});
