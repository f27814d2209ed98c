import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { lockUnsettled } from '../../src/boleto/repository.js';
import { INSTITUTION_BOOK } from '../../src/ledger/ledger.js';
import { BACKENDS } from '../helpers/db.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { bookBalance, boletoInput, centralClient, ledgerSum, ManualClock, newAccount, T0, type CentralClient } from './helpers.js';

/** Settlement: money of paid boletos reaches the beneficiary through the ledger, exactly once. */
describe.each(BACKENDS)('boleto settlements on %s', (backend) => {
  let s: TestServer;
  const clock = new ManualClock(T0);
  let ownIspb: string;

  beforeAll(async () => {
    s = await startTestServer({ backend, clock, workers: false });
    ownIspb = s.ctx.config.institutionIspb;
  });
  afterAll(async () => {
    await s?.close();
  });

  async function paidBoleto(c: CentralClient, amountCents: number, beneficiaryIspb = ownIspb): Promise<string> {
    const created = await c.call('POST', '/boletos', { boleto: boletoInput(clock, { amount_cents: amountCents, beneficiary_ispb: beneficiaryIspb }) });
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    const paid = await c.call('POST', `/boletos/${created.body.data.nosso_numero}/pay`);
    expect(paid.status).toBe(200);
    return created.body.data.nosso_numero;
  }

  async function available(accountId: number): Promise<number> {
    return (await s.admin('GET', `/accounts/${accountId}`)).body.balances.available;
  }

  it('pay moves the money into the clearing book; the trigger credits the beneficiary account and pays other institutions out', async () => {
    const accountId = await newAccount(s);
    const c = await centralClient(s, { accountId });
    const clearingBefore = await bookBalance(s, INSTITUTION_BOOK.boletoClearing);
    const own = [await paidBoleto(c, 10_000), await paidBoleto(c, 2_550), await paidBoleto(c, 1)];
    const external = [await paidBoleto(c, 7_000, '60746948'), await paidBoleto(c, 3_000, '60746948')];
    const unpaid = await c.call('POST', '/boletos', { boleto: boletoInput(clock, { beneficiary_ispb: ownIspb }) });
    expect(await bookBalance(s, INSTITUTION_BOOK.boletoClearing)).toBe(clearingBefore + 2_255_100);
    expect(await available(accountId)).toBe(0);

    clock.advance(60_000);
    const res = await c.call('POST', '/settlements/trigger');
    expect(res.status).toBe(201);
    const settledAt = new Date(clock.ms).toISOString();
    const { settlements } = res.body.data;
    expect(res.body.data).toMatchObject({ boleto_count: 5, amount_cents: 22_551, has_more: false });
    expect(settlements).toEqual([
      {
        id: expect.stringMatching(/^[0-9a-f-]{36}$/),
        status: 'settled',
        beneficiary_ispb: ownIspb,
        account_id: accountId,
        boleto_count: 3,
        amount_cents: 12_551,
        transaction_id: expect.stringMatching(/^BOLSET\d{14}[A-Z0-9]{10}$/),
        settled_at: settledAt,
      },
      {
        id: expect.stringMatching(/^[0-9a-f-]{36}$/),
        status: 'settled',
        beneficiary_ispb: '60746948',
        account_id: null,
        boleto_count: 2,
        amount_cents: 10_000,
        transaction_id: null,
        settled_at: settledAt,
      },
    ]);

    // Ledger: the account got exactly its boletos, in base units; nothing is left in clearing.
    expect(await available(accountId)).toBe(1_255_100);
    expect(await bookBalance(s, INSTITUTION_BOOK.boletoClearing)).toBe(clearingBefore);
    expect(await ledgerSum(s)).toBe(0);
    const entries = await s.ctx.db.query<{ reference: string; code: string; amount: number }>(
      `SELECT t.reference, a.code, e.amount FROM ledger_entries e
         JOIN ledger_transactions t ON t.id = e.ledger_transaction_id
         JOIN ledger_accounts a ON a.id = e.ledger_account_id
        WHERE t.kind = 'boleto_settlement' AND t.reference = ANY($1::text[]) ORDER BY e.id`,
      [settlements.map((x: { id: string }) => x.id)],
    );
    expect(entries).toEqual([
      { reference: settlements[0].id, code: INSTITUTION_BOOK.boletoClearing, amount: -1_255_100 },
      { reference: settlements[0].id, code: `account:${accountId}:available`, amount: 1_255_100 },
      { reference: settlements[1].id, code: INSTITUTION_BOOK.boletoClearing, amount: -1_000_000 },
      { reference: settlements[1].id, code: INSTITUTION_BOOK.centralBank, amount: 1_000_000 },
    ]);

    // The statement record of the credit.
    const [record] = await s.ctx.db.query<Record<string, unknown>>(
      `SELECT t.account_id, t.kind, t.type, t.direction, t.status, t.amount, t.metadata, s.id AS settlement_id, s.boleto_count
         FROM transactions t JOIN boleto_settlements s ON s.transaction_id = t.transaction_id WHERE t.transaction_id = $1`,
      [settlements[0].transaction_id],
    );
    expect(record).toEqual({
      account_id: accountId,
      kind: 'boleto_settlement',
      type: 'internal',
      direction: 'inbound',
      status: 1,
      amount: 1_255_100,
      // The settlement is read through its row (migration 0860), not copied into metadata.
      metadata: {},
      settlement_id: settlements[0].id,
      boleto_count: 3,
    });

    // The boletos are settled and point at their settlement; the unpaid one is untouched.
    for (const nn of own) {
      const b = (await c.call('GET', `/boletos/${nn}`)).body.data;
      expect(b).toMatchObject({ status: 'settled', settlement_id: settlements[0].id, settled_at: settledAt });
    }
    for (const nn of external) expect((await c.call('GET', `/boletos/${nn}`)).body.data.settlement_id).toBe(settlements[1].id);
    expect((await c.call('GET', `/boletos/${unpaid.body.data.nosso_numero}`)).body.data.status).toBe('registered');

    // Paying a settled boleto again changes nothing; a second trigger finds nothing to do.
    expect((await c.call('POST', `/boletos/${own[0]}/pay`)).body.data.status).toBe('settled');
    const again = await c.call('POST', '/settlements/trigger');
    expect(again.status).toBe(200);
    expect(again.body.data).toEqual({ settlements: [], boleto_count: 0, amount_cents: 0, has_more: false });
    expect(await available(accountId)).toBe(1_255_100);
  });

  it('money moves once when the trigger is called concurrently', async () => {
    const accountId = await newAccount(s);
    const c = await centralClient(s, { accountId });
    const amounts = Array.from({ length: 12 }, (_, i) => 1_000 + i * 37);
    const total = amounts.reduce((a, b) => a + b, 0);
    for (const amount of amounts) await paidBoleto(c, amount);
    for (let i = 0; i < 3; i++) await paidBoleto(c, 500, '00360305');

    const answers = await Promise.all(Array.from({ length: 4 }, () => c.call('POST', '/settlements/trigger')));
    expect(answers.map((a) => a.status).sort()).toEqual([200, 200, 200, 201]);
    const winner = answers.find((a) => a.status === 201)!;
    expect(winner.body.data).toMatchObject({ boleto_count: 15, amount_cents: total + 1_500 });
    for (const loser of answers.filter((a) => a !== winner)) expect(loser.body.data.settlements).toEqual([]);

    expect(await available(accountId)).toBe(total * 100);
    const [credits] = await s.ctx.db.query<{ n: number; sum: number }>(
      `SELECT count(*)::bigint AS n, COALESCE(sum(e.amount), 0)::bigint AS sum FROM ledger_entries e
         JOIN ledger_accounts a ON a.id = e.ledger_account_id
         JOIN ledger_transactions t ON t.id = e.ledger_transaction_id
        WHERE a.code = $1 AND t.kind = 'boleto_settlement'`,
      [`account:${accountId}:available`],
    );
    expect(credits).toEqual({ n: 1, sum: total * 100 });
    const [{ settled }] = (await s.ctx.db.query<{ settled: number }>(
      "SELECT count(*)::bigint AS settled FROM boletos WHERE central_key_id = $1 AND status = 'settled'",
      [c.keyId],
    )) as [{ settled: number }];
    expect(settled).toBe(15);
    expect(await ledgerSum(s)).toBe(0);
  });

  // Deterministic interleaving, possible only with more than one connection: while another
  // settlement holds the rows, a trigger skips them instead of waiting or settling them again.
  it.runIf(backend === 'postgres')('a trigger skips boletos another settlement has locked', async () => {
    const accountId = await newAccount(s);
    const c = await centralClient(s, { accountId });
    await paidBoleto(c, 5_000);
    let release!: () => void;
    const held = new Promise<void>((resolve) => (release = resolve));
    let signalLocked!: () => void;
    const locked = new Promise<void>((resolve) => (signalLocked = resolve));
    const holder = s.ctx.db
      .transaction(async (tx) => {
        expect(await lockUnsettled(tx, c.keyId, 10)).toHaveLength(1);
        signalLocked();
        await held;
        throw new Error('roll back');
      })
      .catch(() => {});
    await locked;
    const skipped = await c.call('POST', '/settlements/trigger');
    expect(skipped.status).toBe(200);
    expect(skipped.body.data.settlements).toEqual([]);
    release();
    await holder;
    const settledNow = await c.call('POST', '/settlements/trigger');
    expect(settledNow.status).toBe(201);
    expect(await available(accountId)).toBe(500_000);
  });

  it('a key settles only its own boletos', async () => {
    const a = await centralClient(s, { accountId: await newAccount(s) });
    const b = await centralClient(s, { accountId: await newAccount(s) });
    await paidBoleto(a, 1_000);
    const mine = await paidBoleto(b, 2_000);
    const res = await a.call('POST', '/settlements/trigger');
    expect(res.body.data.amount_cents).toBe(1_000);
    expect((await b.call('GET', `/boletos/${mine}`)).body.data.status).toBe('paid');
  });

  it('the trigger takes no parameters', async () => {
    const c = await centralClient(s);
    const res = await c.call('POST', '/settlements/trigger', { key_id: 3 });
    expect(res.status).toBe(400);
    expect(res.body.error.details.fields).toEqual({ key_id: ['is not a permitted field'] });
    expect((await c.call('POST', '/settlements/trigger', {})).status).toBe(200);
  });

  describe('GET /settlements and GET /settlements/:id', () => {
    let reader: CentralClient;
    const ids: string[] = [];
    const settled: string[][] = [];
    beforeAll(async () => {
      reader = await centralClient(s, { accountId: await newAccount(s) });
      for (let i = 0; i < 3; i++) {
        const numbers = [await paidBoleto(reader, 100 + i), await paidBoleto(reader, 200 + i)];
        const res = await reader.call('POST', '/settlements/trigger');
        ids.push(res.body.data.settlements[0].id);
        settled.push(numbers);
      }
    });

    it('lists the key’s settlements newest first, in pages', async () => {
      const all = await reader.call('GET', '/settlements');
      expect(all.status).toBe(200);
      expect(all.body.data.map((x: { id: string }) => x.id)).toEqual([...ids].reverse());
      expect(all.body.data[0]).toMatchObject({ boleto_count: 2, amount_cents: 304, account_id: reader.accountId });
      expect(all.body.data[0].nosso_numeros).toBeUndefined();
      const first = await reader.call('GET', '/settlements?limit=2');
      expect(first.body.meta).toMatchObject({ count: 2, next_cursor: expect.any(String) });
      const second = await reader.call('GET', `/settlements?limit=2&cursor=${first.body.meta.next_cursor}`);
      expect(second.body.data.map((x: { id: string }) => x.id)).toEqual([ids[0]]);
      expect(second.body.meta.next_cursor).toBeNull();
      const other = await centralClient(s);
      expect((await other.call('GET', '/settlements')).body.data).toEqual([]);
    });

    it('reads one settlement with the nosso_numero of its boletos', async () => {
      const res = await reader.call('GET', `/settlements/${ids[1]}`);
      expect(res.status).toBe(200);
      expect(res.body.data).toMatchObject({ id: ids[1], boleto_count: 2, amount_cents: 302, nosso_numeros: settled[1] });
    });

    it('404 for an unknown settlement or another key’s; 400 for a malformed id or query', async () => {
      const unknown = await reader.call('GET', '/settlements/6f1c3a0e-1b7d-4c55-9a0b-0e2f4d6a8b9c');
      expect(unknown.status).toBe(404);
      expect(unknown.body.error).toEqual({ code: 'NOT_FOUND', message: 'Settlement not found', details: {} });
      const other = await centralClient(s);
      expect((await other.call('GET', `/settlements/${ids[0]}`)).status).toBe(404);
      const bad = await reader.call('GET', '/settlements/42');
      expect(bad.status).toBe(400);
      expect(bad.body.error.details.fields).toEqual({ id: ['must be a UUID'] });
      expect((await reader.call('GET', '/settlements?status=settled')).body.error.details.fields).toEqual({ status: ['is not a permitted field'] });
    });
  });
});
