import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BACKENDS } from '../helpers/db.js';
import { addPixKey, merchantWithKey, type MerchantFixture } from '../helpers/client.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

/**
 * Issue 10, defect 2: an answer recorded inside a transaction counts only once that transaction has
 * committed. When the COMMIT itself fails, the client must not get the success body, and the key
 * must be free for a retry (not stuck in_progress).
 */
describe.each(BACKENDS)('an answer recorded in a transaction whose COMMIT fails, on %s', (backend) => {
  let s: TestServer;
  let m: MerchantFixture;
  beforeAll(async () => {
    s = await startTestServer({ backend });
    m = await merchantWithKey(s);
    await addPixKey(s, m.accountId, 'evp');
    // A deferred constraint trigger runs at COMMIT: while the switch is on, every COMMIT that
    // inserted a charge fails there, after the handler has recorded its answer.
    await s.ctx.db.exec(`
      CREATE TABLE test_commit_switch (refuse boolean NOT NULL);
      INSERT INTO test_commit_switch VALUES (false);
      CREATE FUNCTION test_refuse_commit() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        IF (SELECT refuse FROM test_commit_switch) THEN RAISE EXCEPTION 'commit refused by the test'; END IF;
        RETURN NULL;
      END $$;
      CREATE CONSTRAINT TRIGGER test_refuse_commit AFTER INSERT ON pix_charges
        DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION test_refuse_commit();`);
  });
  afterAll(async () => s?.close());

  const refuse = (on: boolean) => s.ctx.db.query('UPDATE test_commit_switch SET refuse = $1', [on]);
  const charges = async () =>
    (await s.ctx.db.query<{ n: number }>(`SELECT count(*)::bigint AS n FROM transactions WHERE account_id = $1 AND kind = 'charge'`, [m.accountId]))[0]!.n;

  it('answers an error (not the success body) and the same key then runs the operation once', async () => {
    const key = `idem-${randomUUID()}`;
    const body = { amount: 1500, description: 'Pedido 77' };
    await refuse(true);
    const failed = await m.client.post('/pix/cash-in', body, { idempotencyKey: key });
    await refuse(false);
    expect(failed.status).toBe(500);
    expect(failed.body).not.toHaveProperty('transaction_id');
    expect(failed.body).not.toHaveProperty('brcode');
    expect(await charges()).toBe(0);

    const retried = await m.client.post('/pix/cash-in', body, { idempotencyKey: key });
    expect(retried.status).toBe(201);
    expect(retried.headers.get('x-idempotent-replay')).toBeNull();
    expect(retried.body).toMatchObject({ transaction_id: expect.any(String) });
    expect(await charges()).toBe(1);
    const again = await m.client.post('/pix/cash-in', body, { idempotencyKey: key });
    expect(again.headers.get('x-idempotent-replay')).toBe('true');
    expect(again.text).toBe(retried.text);
  }, 40_000);
});
