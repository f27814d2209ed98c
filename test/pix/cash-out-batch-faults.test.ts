import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AppContext } from '../../src/context.js';
import type { Database } from '../../src/db/db.js';
import { HttpError } from '../../src/http/errors.js';
import { cashOut, type CashOutAnswer, type CashOutKey } from '../../src/pix/cashOut.js';
import { parseCashOut } from '../../src/pix/cashOutCommand.js';
import { merchantWithKey, type MerchantFixture } from '../helpers/client.js';
import { BACKENDS } from '../helpers/db.js';
import { expectLedgerConsistent, foreignKey, SIM_FAST } from '../helpers/pix.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

/**
 * Issue 24: step 1 of cash-outs in batches under database faults (src/pix/cashOut.ts).
 *   item 5  an error that does not prove a rollback (57P01, XX000, … reported after the autocommit
 *           statement committed) is never taken as "nothing was written": no second reservation.
 */
const NO_KEY: CashOutKey = { resumes: null, bind: async () => {}, record: async () => {}, claim: null, prepare: () => null };

type Outcome = { ok: true; answer: CashOutAnswer } | { ok: false; status: number; code: string; error: unknown };

/** The one-statement reserve (repo.reserveCashOutsIfUnchanged). */
const RESERVE = /checked AS MATERIALIZED/;

/**
 * The app's database, where the next statement matching `pattern` runs for real (it commits) and
 * its caller is then told it failed with `code` — as PostgreSQL reports a shutdown (57P01) or an
 * internal error (XX000) after an autocommit statement committed.
 */
function failingAfterCommit(db: Database, pattern: RegExp, code: string): { db: Database; fired: () => boolean } {
  let armed = true;
  const query = async (text: string, params?: readonly unknown[]) => {
    const rows = await db.query(text, params);
    if (armed && pattern.test(text)) {
      armed = false;
      throw Object.assign(new Error('terminating connection due to administrator command'), { code, severity: 'FATAL' });
    }
    return rows;
  };
  const wrapped = new Proxy(db, {
    get: (target, prop) => (prop === 'query' ? query : Reflect.get(target, prop, target)),
  });
  return { db: wrapped as Database, fired: () => !armed };
}

describe.each(BACKENDS)('cash-out batches under faults on %s', (backend) => {
  let s: TestServer;
  let receiver: string;
  beforeAll(async () => {
    s = await startTestServer({ backend, env: SIM_FAST, workers: false });
    receiver = await foreignKey(s);
  });
  afterAll(async () => {
    await expectLedgerConsistent(s.ctx.db);
    await s?.close();
  });

  function send(ctx: AppContext, m: MerchantFixture, body: Record<string, unknown>): Promise<Outcome> {
    return cashOut(ctx, { merchantId: m.merchantId, accountId: m.accountId }, parseCashOut({ pix_key: receiver, ...body }), NO_KEY).then(
      (answer): Outcome => ({ ok: true, answer }),
      (error: unknown): Outcome =>
        error instanceof HttpError
          ? { ok: false, status: error.statusCode, code: (error.body as { code: string }).code, error }
          : { ok: false, status: 500, code: 'internal', error },
    );
  }

  const reservations = async (m: MerchantFixture) =>
    (await s.ctx.db.query<{ n: number }>(`SELECT count(*)::int AS n FROM transactions WHERE account_id = $1 AND kind = 'cash_out'`, [m.accountId]))[0]!.n;

  describe.each(['57P01', '57P02', 'XX000', '08006'])('item 5: the reserve statement committed, then %s was reported', (code) => {
    it.each([
      ['an account this process reads first', false],
      ['an account this process knows (no read)', true],
    ])('%s: the request fails, one reservation only (never written again as if nothing happened)', async (_name, known) => {
      const m = await merchantWithKey(s, { depositCents: 100_000 });
      if (known) expect((await send(s.ctx, m, { amount: 100 })).ok).toBe(true);
      const before = await reservations(m);
      const faulty = failingAfterCommit(s.ctx.db, RESERVE, code);
      const ctx: AppContext = { ...s.ctx, db: faulty.db };
      const outcome = await send(ctx, m, { amount: 1000 });
      expect(faulty.fired()).toBe(true);
      expect(outcome.ok).toBe(false);
      expect((outcome as { error: { code?: string } }).error).toMatchObject({ code });
      expect(await reservations(m)).toBe(before + 1);
    });
  });
});
