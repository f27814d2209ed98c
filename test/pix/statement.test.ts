import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { insertTransaction } from '../../src/transactions/repository.js';
import { BACKENDS } from '../helpers/db.js';
import { merchantWithKey, type MerchantFixture } from '../helpers/client.js';
import { foreignKey, SIM_FAST, sandbox, txRow, waitFor } from '../helpers/pix.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

const ITEM_KEYS = [
  'id', 'transaction_id', 'end_to_end_id', 'external_id', 'type', 'status', 'payment_status', 'amount', 'fee_amount', 'net_amount',
  'description', 'direction', 'counterparty_name', 'recipient_key', 'payer_document', 'recipient_document', 'payer_ispb',
  'payer_bank_name', 'created_at', 'completed_at',
].sort();

describe.each(BACKENDS)('GET /statement, GET /transactions, lookups and receipts on %s', (backend) => {
  let s: TestServer;
  let m: MerchantFixture;
  const ids: Record<string, string> = {};

  beforeAll(async () => {
    s = await startTestServer({ backend, env: SIM_FAST });
    m = await merchantWithKey(s, { depositCents: 100_000 });
    await s.admin('PATCH', `/accounts/${m.accountId}`, { cash_out_fee_cents: 10, cash_in_fee_cents: 5 });
    const settle = await foreignKey(s, { name: 'Recebedor Liquidado' });
    const reject = await foreignKey(s, { behavior: 'reject' });
    const hold = await foreignKey(s, { behavior: 'hold' });
    const timeout = await foreignKey(s, { behavior: 'timeout' });

    ids.inbound = (await sandbox(s, 'POST', '/pix/inbound', { account_id: m.accountId, amount: 5000, payer_name: 'Paula Pagadora', payer_document: '52998224725', payer_ispb: '60701190', description: 'Pedido 77' })).body.transaction_id;
    ids.settled = (await m.client.post('/pix/cash-out', { amount: 1000, pix_key: settle, external_id: 'st-settled', description: 'Aluguel' })).body.transaction_id;
    ids.rejected = (await m.client.post('/pix/cash-out', { amount: 1100, pix_key: reject })).body.transaction_id;
    await m.client.post('/pix/cash-out', { amount: 1200, pix_key: timeout, external_id: 'st-timeout' });
    ids.timeout = (await m.client.get('/transactions/ref/st-timeout')).body.transaction_id;
    for (const id of [ids.settled, ids.rejected]) await waitFor(() => txRow(s.ctx.db, id!), (r) => r.stage === 3);
    ids.refundFailed = (await m.client.post('/pix/refund', { original_transaction_id: ids.inbound, amount: 100, reason: 'XX01' })).body.transaction_id;
    await waitFor(() => txRow(s.ctx.db, ids.refundFailed!), (r) => r.stage === 3);
    ids.held = (await m.client.post('/pix/cash-out', { amount: 1300, pix_key: hold })).body.transaction_id;
    await waitFor(() => txRow(s.ctx.db, ids.held!), (r) => r.held_at !== null);

    // Cash-in charges (written by the cash-in domain): listed once paid, found by the lookups always.
    const charge = (status: number, tag: string) =>
      insertTransaction(s.ctx.db, {
        transaction_id: `PIXCHG${tag}`,
        account_id: m.accountId,
        kind: 'charge',
        type: 'pix',
        direction: 'inbound',
        status,
        amount: 777_00,
        tag,
        counterparty_name: 'Cliente QR',
        end_to_end_id: status === 1 ? `E60746948202401010000${tag.padEnd(11, 'X').slice(0, 11)}` : null,
        completed_at: status === 1 ? new Date() : null,
      });
    ids.chargePaid = (await charge(1, 'PAIDTAG1')).transaction_id;
    ids.chargeOpen = (await charge(2, 'OPENTAG1')).transaction_id;
  });
  afterAll(async () => s?.close());

  const statement = async (query = '') => {
    const res = await m.client.get(`/statement${query}`);
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    return res.body as { worked: boolean; data: any[]; page: number; per_page: number };
  };
  const idsOf = (data: any[]) => data.map((d) => d.transaction_id);

  it('answers {worked, data, page, per_page} with the statement item fields; page 1 merges PIX in flight first', async () => {
    const body = await statement();
    expect(body).toMatchObject({ worked: true, page: 1, per_page: 20 });
    for (const item of body.data) expect(Object.keys(item).sort()).toEqual(ITEM_KEYS);
    expect(body.data[0]).toMatchObject({ transaction_id: ids.held, status: 'pending', payment_status: 'processing', completed_at: null, direction: 'outbound' });
    expect(idsOf(body.data).filter((id) => id === ids.held)).toHaveLength(1);
    // Newest first after the merge; an unpaid charge is never listed.
    const rest = body.data.slice(1);
    expect(rest.map((d) => d.created_at)).toEqual([...rest.map((d) => d.created_at)].sort().reverse());
    expect(idsOf(body.data)).toContain(ids.chargePaid);
    expect(idsOf(body.data)).not.toContain(ids.chargeOpen);
  });

  it('items: outbound net = amount + fee with recipient fields; inbound net = amount - fee with payer fields and bank name', async () => {
    const { data } = await statement();
    const out = data.find((d) => d.transaction_id === ids.settled);
    expect(out).toMatchObject({
      type: 'pix',
      direction: 'outbound',
      status: 'completed',
      payment_status: 'settled',
      amount: 100_000,
      fee_amount: 1000,
      net_amount: 101_000,
      external_id: 'st-settled',
      description: 'Aluguel',
      counterparty_name: 'Recebedor Liquidado',
      recipient_key: expect.stringContaining('@example.com'),
      recipient_document: expect.stringMatching(/^\d{11}$/),
      payer_document: null,
      payer_ispb: null,
      payer_bank_name: null,
      completed_at: expect.stringMatching(/Z$/),
      created_at: expect.stringMatching(/Z$/),
    });
    const inb = data.find((d) => d.transaction_id === ids.inbound);
    expect(inb).toMatchObject({
      direction: 'inbound',
      status: 'completed',
      payment_status: null,
      amount: 500_000,
      fee_amount: 500,
      net_amount: 499_500,
      counterparty_name: 'Paula Pagadora',
      payer_document: '52998224725',
      payer_ispb: '60701190',
      payer_bank_name: 'Itaú Unibanco S.A.',
      recipient_key: null,
      recipient_document: null,
      description: 'Pedido 77',
    });
  });

  it('status filters apply to payment_status; display values differ (completed, pending); no merge for settled/rejected', async () => {
    const settled = await statement('?status=settled');
    expect(idsOf(settled.data)).toEqual(expect.arrayContaining([ids.settled, ids.inbound, ids.chargePaid]));
    expect(settled.data.find((d) => d.transaction_id === ids.inbound).status).toBe('completed'); // empty payment_status, status 1
    expect(settled.data.every((d) => d.status === 'completed')).toBe(true);
    expect(idsOf(settled.data)).not.toContain(ids.held);

    const rejected = await statement('?status=rejected');
    expect(idsOf(rejected.data)).toEqual([ids.rejected]);
    expect(rejected.data[0]).toMatchObject({ status: 'rejected', payment_status: 'rejected' });

    const failed = await statement('?status=failed');
    expect(idsOf(failed.data).sort()).toEqual([ids.refundFailed, ids.timeout].sort());
    expect(failed.data.every((d) => d.status === 'failed')).toBe(true);

    const processing = await statement('?status=processing');
    expect(idsOf(processing.data)).toEqual([ids.held]);
    expect(processing.data[0]).toMatchObject({ status: 'pending', payment_status: 'processing' });
  });

  it('type filter; unknown filter values are 400 with worked: false', async () => {
    const internal = await statement('?type=internal');
    expect(internal.data.length).toBe(1);
    expect(internal.data[0]).toMatchObject({ type: 'internal', direction: 'inbound', counterparty_name: 'Operator deposit' });
    expect((await statement('?type=ted')).data).toEqual([]);
    const pix = await statement('?type=pix');
    expect(pix.data.every((d) => d.type === 'pix')).toBe(true);
    expect(idsOf(pix.data)[0]).toBe(ids.held);
    for (const [query, field, message] of [
      ['?status=pending', 'status', 'must be one of: settled, rejected, failed, processing'],
      ['?type=boleto', 'type', 'must be one of: pix, ted, internal'],
    ]) {
      const res = await m.client.get(`/statement${query}`);
      expect(res.status).toBe(400);
      expect(res.body).toEqual({ worked: false, errors: { bad_request: { [field!]: [message] } } });
    }
  });

  it('page and per_page: default 20, maximum 100 (above is 400), pages do not overlap, the merged rows lead the first page', async () => {
    const all = await statement('?per_page=100');
    expect(all.per_page).toBe(100);
    const regular = idsOf(all.data).slice(1);
    // One list (in flight first, then the rest), cut into pages of per_page: never more per page.
    const p1 = await statement('?per_page=3');
    expect(idsOf(p1.data)).toEqual([ids.held, ...regular.slice(0, 2)]);
    const p2 = await statement('?per_page=3&page=2');
    expect(p2).toMatchObject({ page: 2, per_page: 3 });
    expect(idsOf(p2.data)).toEqual(regular.slice(2, 5));
    const beyond = await statement('?per_page=3&page=50');
    expect(beyond.data).toEqual([]);
    for (const [query, field, message] of [
      ['?per_page=101', 'per_page', 'must be less than or equal to 100'],
      ['?per_page=0', 'per_page', 'must be greater than or equal to 1'],
      ['?page=0', 'page', 'must be greater than or equal to 1'],
      ['?page=abc', 'page', 'must be an integer'],
      ['?per_page=-1', 'per_page', 'must be an integer'],
    ]) {
      const res = await m.client.get(`/statement${query}`);
      expect(res.status, query).toBe(400);
      expect(res.body).toEqual({ worked: false, errors: { bad_request: { [field!]: [message] } } });
    }
  });

  it('date_from and date_to are UTC days: from 00:00:00Z to 23:59:59Z inclusive', async () => {
    const d = await merchantWithKey(s);
    const at = async (iso: string) =>
      (
        await insertTransaction(s.ctx.db, {
          transaction_id: `DEP${iso.replace(/\D/g, '')}`,
          account_id: d.accountId,
          kind: 'deposit',
          type: 'internal',
          direction: 'inbound',
          status: 1,
          amount: 100,
          created_at: new Date(iso),
          completed_at: new Date(iso),
        })
      ).transaction_id;
    const before = await at('2024-03-10T23:59:59.999Z');
    const first = await at('2024-03-11T00:00:00.000Z');
    const last = await at('2024-03-11T23:59:59.999Z');
    const after = await at('2024-03-12T00:00:00.000Z');
    const get = async (q: string) => idsOf((await d.client.get(`/statement${q}`)).body.data);
    expect(await get('?date_from=2024-03-11&date_to=2024-03-11')).toEqual([last, first]);
    expect(await get('?date_from=2024-03-11')).toEqual([after, last, first]);
    expect(await get('?date_to=2024-03-10')).toEqual([before]);
    for (const [q, field, message] of [
      ['?date_from=2024-02-30', 'date_from', 'must be a date YYYY-MM-DD'],
      ['?date_to=11/03/2024', 'date_to', 'must be a date YYYY-MM-DD'],
      ['?date_from=2024-03-12&date_to=2024-03-11', 'date_to', 'must not be before date_from'],
    ]) {
      const res = await d.client.get(`/statement${q}`);
      expect(res.status).toBe(400);
      expect(res.body).toEqual({ worked: false, errors: { bad_request: { [field!]: [message] } } });
    }
    // The merge honours the date bounds too.
    expect(idsOf((await statement('?date_to=2024-01-01')).data)).toEqual([]);
  });

  it('needs statement:read; X-Key-Case camelCase reads perPage and answers camelCase', async () => {
    const k = await merchantWithKey(s, { permissions: ['transfer:read'] });
    expect((await k.client.get('/statement')).body).toEqual({ error: 'forbidden', message: 'API key lacks permission: statement:read' });
    const camel = await m.client.get('/statement?perPage=2&status=settled', { camelCase: true });
    expect(camel.body).toMatchObject({ worked: true, perPage: 2, page: 1 });
    expect(Object.keys(camel.body.data[0])).toContain('transactionId');
  });

  it('GET /transactions: the same parameters and envelope, records in flight in their place with their actual payment_status', async () => {
    const res = await m.client.get('/transactions?per_page=100');
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ worked: true, page: 1, per_page: 100 });
    const held = res.body.data.find((d: any) => d.transaction_id === ids.held);
    expect(held).toMatchObject({ status: 'pending', payment_status: 'processing', final: false });
    expect(res.body.data.map((d: any) => d.created_at)).toEqual([...res.body.data.map((d: any) => d.created_at)].sort().reverse());
    expect(res.body.data.map((d: any) => d.transaction_id)).not.toContain(ids.chargeOpen);
    expect((await m.client.get('/transactions?status=processing')).body.data.map((d: any) => d.transaction_id)).toEqual([ids.held]);
    expect((await m.client.get('/transactions?per_page=500')).status).toBe(400);
    // Empty parameters take their defaults (found by the fuzzers: the document used to refuse them,
    // so the contract check fails this test on a document that says otherwise).
    const empty = await m.client.get('/transactions?page=&per_page=&date_from=&date_to=');
    expect(empty.status).toBe(200);
    expect(empty.body).toMatchObject({ page: 1, per_page: 20 });
  });

  it('the four lookups answer 200 with the record, 404 with Transaction not found', async () => {
    const settled = await txRow(s.ctx.db, ids.settled!);
    const byId = await m.client.get(`/transactions/${ids.settled}`);
    expect(byId.status).toBe(200);
    expect(byId.body).toMatchObject({ worked: true, transaction_id: ids.settled, status: 'completed', payment_status: 'settled', final: true, recipient_key_type: 'email', recipient_bank_name: 'Nu Pagamentos S.A.' });
    expect((await m.client.get(`/transactions/${settled.id}`)).body.transaction_id).toBe(ids.settled);
    expect((await m.client.get(`/transactions/e2e/${settled.end_to_end_id}`)).body.transaction_id).toBe(ids.settled);
    expect((await m.client.get('/transactions/ref/st-settled')).body.transaction_id).toBe(ids.settled);
    expect((await m.client.get('/transactions/tag/PAIDTAG1')).body).toMatchObject({ transaction_id: ids.chargePaid, tag: 'PAIDTAG1' });
    // Lookups find a charge before it is paid, though the statement does not list it.
    expect((await m.client.get('/transactions/tag/OPENTAG1')).body).toMatchObject({ transaction_id: ids.chargeOpen, status: 'pending' });

    const other = await merchantWithKey(s);
    for (const path of [
      '/transactions/PIXOUT00000000000000NOTHERE0',
      `/transactions/${settled.id.replace(/^./, settled.id[0] === 'a' ? 'b' : 'a')}`,
      '/transactions/e2e/E99999999202401010000AAAAAAAAAAA',
      '/transactions/tag/no-such-tag',
      '/transactions/ref/no-such-ref',
    ]) {
      const res = await m.client.get(path);
      expect(res.status, path).toBe(404);
      expect(res.body).toEqual({ errors: { not_found: 'Transaction not found' } });
    }
    for (const path of [`/transactions/${ids.settled}`, `/transactions/e2e/${settled.end_to_end_id}`, '/transactions/ref/st-settled', '/transactions/tag/PAIDTAG1']) {
      expect((await other.client.get(path)).status, path).toBe(404);
    }
  });

  it('the receipt: payer, receiver, amount, date and end-to-end id after settlement; a clear 422 before', async () => {
    const out = await m.client.get(`/transactions/${ids.settled}/receipt`);
    expect(out.status).toBe(200);
    expect(out.body).toEqual({
      worked: true,
      transaction_id: ids.settled,
      end_to_end_id: expect.stringMatching(/^E99999999/),
      type: 'pix',
      direction: 'outbound',
      amount: 100_000,
      description: 'Aluguel',
      date: expect.stringMatching(/Z$/),
      payer: { name: 'Loja Teste', document: expect.stringMatching(/^\d{14}$/), ispb: '99999999', bank_name: 'pixgate', pix_key: null },
      receiver: { name: 'Recebedor Liquidado', document: expect.stringMatching(/^\d{11}$/), ispb: '18236120', bank_name: 'Nu Pagamentos S.A.', pix_key: expect.stringContaining('@') },
    });
    const inb = await m.client.get(`/transactions/${ids.inbound}/receipt`);
    expect(inb.body).toMatchObject({
      direction: 'inbound',
      payer: { name: 'Paula Pagadora', document: '52998224725', ispb: '60701190', bank_name: 'Itaú Unibanco S.A.' },
      receiver: { name: 'Loja Teste', ispb: '99999999' },
    });
    const pending = await m.client.get(`/transactions/${ids.held}/receipt`);
    expect(pending.status).toBe(422);
    expect(pending.body).toEqual({ errors: { unprocessable_entity: 'The receipt is available after settlement; the transaction is still being processed' } });
    const deposit = (await statement('?type=internal')).data[0].transaction_id;
    expect((await m.client.get(`/transactions/${deposit}/receipt`)).body).toEqual({ errors: { unprocessable_entity: 'Receipts exist for PIX transactions only' } });
    expect((await m.client.get('/transactions/PIXOUTNOPE/receipt')).body).toEqual({ errors: { not_found: 'Transaction not found' } });

    // Settling the held payout makes its receipt available.
    await sandbox(s, 'POST', `/payouts/${ids.held}/settle`);
    expect((await m.client.get(`/transactions/${ids.held}/receipt`)).status).toBe(200);
  });
});
