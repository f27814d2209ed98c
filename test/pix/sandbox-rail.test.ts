import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { railNotificationHandler } from '../../src/pix/railEvents.js';
import { recoverUnsent } from '../../src/pix/recovery.js';
import { parseConfig } from '../../src/config.js';
import { startServer } from '../../src/server.js';
import pino from 'pino';
import type { RailNotification } from '../../src/rail/rail.js';
import { BACKENDS } from '../helpers/db.js';
import { merchantWithKey, type MerchantFixture } from '../helpers/client.js';
import { validCpf } from '../helpers/fixtures.js';
import { balances, eventNames, expectLedgerConsistent, foreignKey, outbox, SIM_FAST, sandbox, txRow, waitFor } from '../helpers/pix.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

describe.each(BACKENDS)('sandbox rail controls on %s', (backend) => {
  let s: TestServer;
  let m: MerchantFixture;
  beforeAll(async () => {
    s = await startTestServer({ backend, env: SIM_FAST });
    m = await merchantWithKey(s, { depositCents: 100_000 });
  });
  afterAll(async () => {
    await expectLedgerConsistent(s.ctx.db);
    await s?.close();
  });

  it('POST /dict/keys registers a key of another institution (201), re-registers it (200), refuses bad input (400) and keys of this institution (409)', async () => {
    const doc = validCpf();
    const body = { key: 'Alguem@Example.com', type: 'email', name: 'Alguém', document: doc, ispb: '00000000' };
    const created = await sandbox(s, 'POST', '/dict/keys', body);
    expect(created).toEqual({
      status: 201,
      body: { key: 'alguem@example.com', type: 'email', name: 'Alguém', document: doc, ispb: '00000000', bank_name: 'Banco do Brasil S.A.', behavior: 'settle', fraud_flagged: false },
    });
    const again = await sandbox(s, 'POST', '/dict/keys', { ...body, behavior: 'hold', fraud_flagged: true, bank_name: 'Meu Banco' });
    expect(again.status).toBe(200);
    expect(again.body).toMatchObject({ behavior: 'hold', fraud_flagged: true, bank_name: 'Meu Banco' });

    const bad = await sandbox(s, 'POST', '/dict/keys', { key: 'x', type: 'cpf', name: '', document: '123', ispb: '1', behavior: 'explode' });
    expect(bad.status).toBe(400);
    expect(Object.keys(bad.body.errors.bad_request).sort()).toEqual(['behavior', 'document', 'ispb', 'name']);
    expect((await sandbox(s, 'POST', '/dict/keys', { ...body, key: '123', type: 'cpf' })).body).toEqual({ errors: { bad_request: { key: ['is not a valid cpf key'] } } });

    const own = await s.admin('POST', '/pix-keys', { account_id: m.accountId, type: 'evp' });
    expect(await sandbox(s, 'POST', '/dict/keys', { ...body, key: own.body.key, type: 'evp' })).toEqual({
      status: 409,
      body: { errors: { conflict: 'PIX key belongs to an account of this institution' } },
    });
  });

  it('POST /pix/inbound credits the account minus its cash-in fee, fires pix.charge.paid and shows the payer in the statement', async () => {
    await s.admin('PATCH', `/accounts/${m.accountId}`, { cash_in_fee_cents: 25 });
    const before = await balances(s.ctx.db, m.accountId);
    const res = await sandbox(s, 'POST', '/pix/inbound', {
      account_id: m.accountId,
      amount: 1990,
      payer_name: 'Rita Pagadora',
      payer_document: '11444777000161',
      payer_ispb: '00360305',
      description: 'Mensalidade',
    });
    expect(res).toEqual({
      status: 201,
      body: { transaction_id: expect.stringMatching(/^PIXIN\d{14}[A-Z0-9]{10}$/), end_to_end_id: expect.stringMatching(/^E00360305\d{12}[A-Z0-9]{11}$/), amount: 199_000 },
    });
    expect((await balances(s.ctx.db, m.accountId)).available).toBe(before.available + 199_000 - 2500);
    const [paid] = await outbox(s.ctx.db, res.body.transaction_id);
    expect(paid!.event).toBe('pix.charge.paid');
    expect(paid!.payload).toEqual({
      event: 'pix.charge.paid',
      status: 'paid',
      transaction_id: res.body.transaction_id,
      end_to_end_id: res.body.end_to_end_id,
      account_id: m.accountId,
      direction: 'credit',
      amount: 199_000,
      fee_amount: 2500,
      net_amount: 196_500,
      payer: { name: 'Rita Pagadora', document: '11444777000161', ispb: '00360305', bank_name: 'Caixa Econômica Federal' },
      description: 'Mensalidade',
      txid: null,
      paid_at: expect.stringMatching(/Z$/),
    });
    const item = (await m.client.get('/statement')).body.data.find((d: any) => d.transaction_id === res.body.transaction_id);
    expect(item).toMatchObject({ direction: 'inbound', type: 'pix', counterparty_name: 'Rita Pagadora', payer_document: '11444777000161', payer_ispb: '00360305', payer_bank_name: 'Caixa Econômica Federal' });

    // A payment smaller than the fee credits nothing but is recorded.
    const tiny = await sandbox(s, 'POST', '/pix/inbound', { account_id: m.accountId, amount: 10 });
    expect((await txRow(s.ctx.db, tiny.body.transaction_id)).fee_amount).toBe(1000);
    await s.admin('PATCH', `/accounts/${m.accountId}`, { cash_in_fee_cents: 0 });

    expect(await sandbox(s, 'POST', '/pix/inbound', { account_id: 999_999, amount: 1 })).toEqual({ status: 400, body: { errors: { bad_request: { account_id: ['does not exist'] } } } });
    expect((await sandbox(s, 'POST', '/pix/inbound', { account_id: m.accountId, amount: 0 })).status).toBe(400);
  });

  it('a redelivered notification is applied once (rail inbox), and a handler error is retried', async () => {
    const key = await foreignKey(s, { behavior: 'hold' });
    const res = await m.client.post('/pix/cash-out', { amount: 100, pix_key: key });
    await waitFor(() => eventNames(s.ctx.db, res.body.transaction_id), (e) => e.includes('pix.payout.held'));
    const handler = railNotificationHandler(s.ctx);
    const settled: RailNotification = { id: 'test:settle:1', at: new Date(), kind: 'payment.settled', endToEndId: res.body.end_to_end_id, settledAt: new Date() };
    await Promise.all([handler(settled), handler(settled), handler({ ...settled, id: 'test:settle:2' })]);
    expect(await eventNames(s.ctx.db, res.body.transaction_id)).toEqual(['pix.payout.processing', 'pix.payout.held', 'pix.payout.confirmed']);
    const [{ n }] = (await s.ctx.db.query<{ n: number }>(
      `SELECT count(*)::bigint AS n FROM ledger_transactions WHERE reference = $1 AND kind = 'cash_out_settle'`,
      [res.body.transaction_id],
    )) as [{ n: number }];
    expect(n).toBe(1);
  });

  it('the recovery worker sends again an order left unacknowledged (stage 1) and it completes once', async () => {
    const key = await foreignKey(s);
    const res = await m.client.post('/pix/cash-out', { amount: 100, pix_key: key, external_id: 'recover-1' });
    await waitFor(() => txRow(s.ctx.db, res.body.transaction_id), (r) => r.stage === 3);
    // An order whose request died after reserving: its rail order never went out.
    const orphan = await m.client.post('/pix/cash-out', { amount: 100, pix_key: await foreignKey(s, { behavior: 'hold' }) });
    await waitFor(() => eventNames(s.ctx.db, orphan.body.transaction_id), (e) => e.includes('pix.payout.held'));
    await s.ctx.db.query(`DELETE FROM sim_payments WHERE end_to_end_id = $1`, [orphan.body.end_to_end_id]);
    await s.ctx.db.query(`UPDATE transactions SET stage = 1, held_at = NULL WHERE transaction_id = $1`, [orphan.body.transaction_id]);
    await s.ctx.db.query(`UPDATE sim_dict_entries SET behavior = 'settle' WHERE key = (SELECT recipient_key FROM transactions WHERE transaction_id = $1)`, [orphan.body.transaction_id]);
    expect(await recoverUnsent(s.ctx, { olderThanMs: 0 })).toBe(1);
    const row = await waitFor(() => txRow(s.ctx.db, orphan.body.transaction_id), (r) => r.stage === 3);
    expect(row.payment_status).toBe('settled');
    const [{ n }] = (await s.ctx.db.query<{ n: number }>(
      `SELECT count(*)::bigint AS n FROM ledger_transactions WHERE reference = $1 AND kind = 'cash_out_reserve'`,
      [orphan.body.transaction_id],
    )) as [{ n: number }];
    expect(n).toBe(1);
    expect(await recoverUnsent(s.ctx, { olderThanMs: 0 })).toBe(0);
  });
});

describe.each(BACKENDS)('two processes on one database on %s', (backend) => {
  it('share the simulator and recovery work: every payout settles once, each event once', async () => {
    const a = await startTestServer({ backend, env: { SIM_SETTLEMENT_MS: '20' } });
    // A second pixgate instance on the same database, with its own simulator engine and workers.
    const b = await startServer(parseConfig({ PORT: '0', ADMIN_TOKEN: 'second-instance-admin-token', LOG_LEVEL: 'silent', SIM_SETTLEMENT_MS: '20' }), {
      db: a.ctx.db,
      ownsDatabase: false,
      log: pino({ level: 'silent' }),
      print: () => {},
      seed: false,
    });
    try {
      const m = await merchantWithKey(a, { depositCents: 100_000 });
      const key = await foreignKey(a);
      const sent = await Promise.all(Array.from({ length: 30 }, (_, i) => m.client.post('/pix/cash-out', { amount: 100 + i, pix_key: key })));
      for (const r of sent) await waitFor(() => txRow(a.ctx.db, r.body.transaction_id), (row) => row.stage === 3);
      for (const r of sent) expect(await eventNames(a.ctx.db, r.body.transaction_id)).toEqual(['pix.payout.processing', 'pix.payout.confirmed']);
      const [{ n }] = (await a.ctx.db.query<{ n: number }>(
        `SELECT count(*)::bigint AS n FROM ledger_transactions WHERE kind = 'cash_out_settle' AND reference = ANY($1::text[])`,
        [sent.map((r) => r.body.transaction_id)],
      )) as [{ n: number }];
      expect(n).toBe(30);
      await expectLedgerConsistent(a.ctx.db);
    } finally {
      await b.stop();
      await a.close();
    }
  });
});

describe('the simulator is deterministic under SIM_SEED', () => {
  it('two servers with the same seed draw the same payers and end-to-end ids', async () => {
    const draw = async () => {
      const s = await startTestServer({ env: { ...SIM_FAST, SIM_SEED: '12345' }, clock: { now: () => new Date('2025-01-02T03:04:05Z') } });
      try {
        const m = await merchantWithKey(s);
        const out = [];
        for (let i = 0; i < 3; i++) {
          const res = await sandbox(s, 'POST', '/pix/inbound', { account_id: m.accountId, amount: 100 });
          const row = await txRow(s.ctx.db, res.body.transaction_id);
          out.push([res.body.end_to_end_id, row.counterparty_name, row.payer_document, row.payer_ispb]);
        }
        return out;
      } finally {
        await s.close();
      }
    };
    const [a, b] = [await draw(), await draw()];
    expect(a).toEqual(b);
    expect(new Set(a.map((r) => r[0])).size).toBe(3);
  });
});
