import { randomUUID } from 'node:crypto';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { BACKENDS } from '../helpers/db.js';
import { merchantWithKey, type MerchantFixture, type Res } from '../helpers/client.js';
import { balances, expectLedgerConsistent, foreignKey, SIM_FAST, sandbox, txRow, waitFor } from '../helpers/pix.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

/**
 * Issue 10, defect 1: an Idempotency-Key is bound to the record it creates, in that record's own
 * transaction, so no stall, lease expiry or takeover makes a second cash-out or refund.
 */
const RAIL_TIMEOUT_MS = 1500;
const LEASE_MS = 3000;

describe.each(BACKENDS)('exactly-once cash-outs and refunds under one Idempotency-Key on %s', (backend) => {
  let s: TestServer;
  let receiver: string;
  /** The server's clock runs `shift` ms ahead of real time: a lease can be made to expire at once. */
  let shift = 0;
  beforeAll(async () => {
    s = await startTestServer({
      backend,
      env: { ...SIM_FAST, RAIL_TIMEOUT_MS: String(RAIL_TIMEOUT_MS), IDEMPOTENCY_LEASE_MS: String(LEASE_MS) },
      clock: { now: () => new Date(Date.now() + shift) },
    });
    receiver = await foreignKey(s);
  });
  afterEach(async () => {
    expect((await sandbox(s, 'PUT', '/rail/stall', { delay_ms: 0, drop: false })).status).toBe(200);
  });
  afterAll(async () => {
    await expectLedgerConsistent(s.ctx.db);
    await s?.close();
  });

  const records = (m: MerchantFixture, kind: string) =>
    s.ctx.db.query<{ transaction_id: string; stage: number }>('SELECT transaction_id, stage FROM transactions WHERE account_id = $1 AND kind = $2', [m.accountId, kind]);
  const firstRecord = (m: MerchantFixture, kind: string) => waitFor(() => records(m, kind), (rows) => rows.length > 0);
  const stall = async (delay_ms: number) => {
    const res = await sandbox(s, 'PUT', '/rail/stall', { delay_ms, drop: false });
    expect(res).toEqual({ status: 200, body: { delay_ms, drop: false } });
  };

  it('the rail stalls past the lease: the retry under the same key answers the original order, one order, one debit', async () => {
    const m = await merchantWithKey(s, { depositCents: 100_000 });
    await stall(4000);
    const key = `idem-${randomUUID()}`;
    const body = { amount: 1000, pix_key: receiver };
    const first = m.client.post('/pix/cash-out', body, { idempotencyKey: key });
    await firstRecord(m, 'cash_out');
    // The client gives up and retries once the first request's lease has passed (real time).
    await waitFor(
      () => s.ctx.db.query<{ done: boolean }>(`SELECT status = 'completed' OR locked_until <= now() AS done FROM idempotency_keys WHERE key = $1`, [key]),
      (rows) => rows[0]?.done === true,
    );
    const retry = await m.client.post('/pix/cash-out', body, { idempotencyKey: key });
    const original = await first;
    expect(original.status).toBe(200);
    expect(retry.status).toBe(200);
    expect(retry.body.transaction_id).toBe(original.body.transaction_id);
    expect(await records(m, 'cash_out')).toHaveLength(1);
    await stall(0);
    await waitFor(() => txRow(s.ctx.db, original.body.transaction_id), (r) => r.stage === 3);
    expect(await balances(s.ctx.db, m.accountId)).toEqual({ available: 10_000_000 - 100_000, blocked: 0, pending: 0 });
  });

  it('a request that lost its key (holder presumed dead) is resumed by the retry: same order, sent once more, never a second one', async () => {
    const m = await merchantWithKey(s, { depositCents: 100_000 });
    await stall(RAIL_TIMEOUT_MS + 2000);
    const key = `idem-${randomUUID()}`;
    const body = { amount: 2500, pix_key: receiver };
    const first = m.client.post('/pix/cash-out', body, { idempotencyKey: key }).catch((err: unknown) => err);
    const [created] = await firstRecord(m, 'cash_out');
    shift += LEASE_MS + 1000; // the holder is still waiting for the rail, but its lease is over
    const retry: Res = await m.client.post('/pix/cash-out', body, { idempotencyKey: key });
    expect(retry.status).toBe(200);
    expect(retry.body).toMatchObject({ worked: true, transaction_id: created!.transaction_id });
    await first;
    expect(await records(m, 'cash_out')).toHaveLength(1);
    // A later retry is answered from the record too.
    const again = await m.client.post('/pix/cash-out', body, { idempotencyKey: key });
    expect(again.body.transaction_id).toBe(created!.transaction_id);
    await stall(0);
    await waitFor(() => txRow(s.ctx.db, created!.transaction_id), (r) => r.stage === 3);
    expect(await records(m, 'cash_out')).toHaveLength(1);
    expect(await balances(s.ctx.db, m.accountId)).toEqual({ available: 10_000_000 - 250_000, blocked: 0, pending: 0 });
  });

  it('refunds: the retry that takes the key over resumes the refund the first request created', async () => {
    const m = await merchantWithKey(s);
    const inbound = await sandbox(s, 'POST', '/pix/inbound', { account_id: m.accountId, amount: 5000, payer_name: 'Carlos Pagador', payer_document: '52998224725', payer_ispb: '60746948' });
    expect(inbound.status).toBe(201);
    await stall(RAIL_TIMEOUT_MS + 2000);
    const key = `idem-${randomUUID()}`;
    const body = { original_transaction_id: inbound.body.transaction_id, amount: 1000 };
    const first = m.client.post('/pix/refund', body, { idempotencyKey: key }).catch((err: unknown) => err);
    const [created] = await firstRecord(m, 'refund');
    shift += LEASE_MS + 1000;
    const retry = await m.client.post('/pix/refund', body, { idempotencyKey: key });
    expect([200, 202]).toContain(retry.status); // accepted, or settled by the time it answers
    expect(retry.body).toMatchObject({ worked: true, transaction_id: created!.transaction_id });
    await first;
    await stall(0);
    await waitFor(() => txRow(s.ctx.db, created!.transaction_id), (r) => r.stage === 3);
    expect(await records(m, 'refund')).toHaveLength(1);
    expect(await balances(s.ctx.db, m.accountId)).toEqual({ available: 500_000 - 100_000, blocked: 0, pending: 0 });
  });

  it('GET and PUT /api/sandbox/rail/stall: the setting is read back, validated and cleared', async () => {
    expect(await sandbox(s, 'GET', '/rail/stall')).toEqual({ status: 200, body: { delay_ms: 0, drop: false } });
    expect(await sandbox(s, 'PUT', '/rail/stall', { delay_ms: 250, drop: true })).toEqual({ status: 200, body: { delay_ms: 250, drop: true } });
    expect(await sandbox(s, 'GET', '/rail/stall')).toEqual({ status: 200, body: { delay_ms: 250, drop: true } });
    expect((await sandbox(s, 'PUT', '/rail/stall', { delay_ms: -1, drop: false })).status).toBe(400);
    expect((await sandbox(s, 'PUT', '/rail/stall', { delay_ms: 1.5 })).status).toBe(400);
    expect(await sandbox(s, 'PUT', '/rail/stall', { delay_ms: 0, drop: false })).toEqual({ status: 200, body: { delay_ms: 0, drop: false } });
  });

  it('drop: the answer never comes, the call ends at RAIL_TIMEOUT_MS, the order stays accepted and is still processed', async () => {
    const m = await merchantWithKey(s, { depositCents: 100_000 });
    expect((await sandbox(s, 'PUT', '/rail/stall', { delay_ms: 0, drop: true })).status).toBe(200);
    const res = await m.client.post('/pix/cash-out', { amount: 700, pix_key: receiver }, { idempotencyKey: `idem-${randomUUID()}` });
    // Answered after RAIL_TIMEOUT_MS from the record as it stands (the simulator settles quickly).
    expect(res.status).toBe(200);
    expect(['accepted', 'settled']).toContain(res.body.status);
    await waitFor(() => txRow(s.ctx.db, res.body.transaction_id), (r) => r.stage === 3);
    expect((await txRow(s.ctx.db, res.body.transaction_id)).payment_status).toBe('settled');
  });
});
