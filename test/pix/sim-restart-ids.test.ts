import { afterAll, describe, expect, it } from 'vitest';
import { BACKENDS, openTestDatabase, type TestDatabase } from '../helpers/db.js';
import { validCnpj } from '../helpers/fixtures.js';
import { startTestServer } from '../helpers/server.js';

/**
 * Found by the fault-injection suite (docs/chaos.md): the rail simulator draws other banks'
 * end-to-end ids from a PRNG seeded with SIM_SEED, so a process restarted with the same seed draws
 * the same ids again. Within the same minute (the id's time stamp), a new inbound PIX got the id of
 * an earlier one: the simulator kept the old payment (ON CONFLICT DO NOTHING), the sandbox answered
 * 201 with the old record, and the new payment was never credited. Each new payment and return
 * must get an id of its own, with the draws still following the seed.
 */
const SIM = { SIM_SEED: '4242', SIM_SETTLEMENT_MS: '0' };
// Time runs from 15:00:01 UTC, so both payments fall in the same minute (the ids' time stamp).
const started = Date.now();
const clock = { now: () => new Date(Date.parse('2026-11-23T15:00:01.000Z') + (Date.now() - started)) };

describe.each(BACKENDS)('simulator ids after a restart with the same SIM_SEED, %s', (backend) => {
  let database: TestDatabase;
  afterAll(() => database?.close());

  it('a restarted process does not reuse an end-to-end id: both inbound PIX are credited', async () => {
    database = await openTestDatabase(backend);
    let server = await startTestServer({ database, env: SIM, clock });
    const m = await server.admin('POST', '/merchants', { name: 'Restart Ids', document: validCnpj() });
    const sandbox = async (url: string, path: string, body: unknown) => {
      const res = await fetch(`${url}/api/sandbox${path}`, {
        method: 'POST',
        headers: { authorization: 'Bearer test-admin-token-0123456789', 'content-type': 'application/json' },
        body: JSON.stringify(body),
      });
      return { status: res.status, body: (await res.json()) as any };
    };
    const a = await sandbox(server.url, '/pix/inbound', { account_id: m.body.account_id, amount: 1000 });
    expect(a.status).toBe(201);
    await server.close();

    server = await startTestServer({ database, env: SIM, clock });
    const b = await sandbox(server.url, '/pix/inbound', { account_id: m.body.account_id, amount: 2345 });
    expect(b.status).toBe(201);
    expect(b.body.end_to_end_id).not.toBe(a.body.end_to_end_id);
    expect(b.body.amount).toBe(234_500);
    const account = await server.admin('GET', `/accounts/${m.body.account_id}`);
    expect(account.body.balances.available).toBe(334_500);
    await server.close();
  });
});
