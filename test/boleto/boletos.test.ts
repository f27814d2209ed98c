import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { addDays, dueDateFactor, isValidBarcode, linhaDigitavelToBarcode, formatLinhaDigitavel } from '../../src/boleto/barcode.js';
import { BANK_CODE, brasiliaToday, freeField } from '../../src/boleto/service.js';
import { INSTITUTION_BOOK } from '../../src/ledger/ledger.js';
import { BACKENDS } from '../helpers/db.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import {
  bookBalance,
  boletoInput,
  centralClient,
  centralRequest,
  ledgerSum,
  ManualClock,
  newAccount,
  T0,
  type CentralClient,
} from './helpers.js';

/** Every boleto endpoint's success, error and security paths (APP_ENV=local: no limits in the way). */
describe.each(BACKENDS)('boleto central API on %s', (backend) => {
  let s: TestServer;
  let client: CentralClient;
  const clock = new ManualClock(T0);
  const today = brasiliaToday(new Date(T0));

  beforeAll(async () => {
    s = await startTestServer({ backend, clock, workers: false });
    client = await centralClient(s);
  });
  afterAll(async () => {
    await s?.close();
  });

  async function create(overrides: Record<string, unknown> = {}, c: CentralClient = client) {
    const boleto = boletoInput(clock, overrides);
    const res = await c.call('POST', '/boletos', { boleto });
    expect(res.status, JSON.stringify(res.body)).toBe(201);
    return res.body.data;
  }

  function expectError(res: { status: number; body: any; headers: Headers }, status: number, code: string) {
    expect(res.status, JSON.stringify(res.body)).toBe(status);
    expect(res.body).toEqual({
      success: false,
      error: { code, message: expect.any(String), details: expect.any(Object) },
      meta: { request_id: res.headers.get('x-request-id') },
    });
  }

  describe('authentication', () => {
    it('401 in the envelope without a key, with an unknown key, and with an inactive key', async () => {
      const missing = await centralRequest(s, 'GET', '/boletos');
      expectError(missing, 401, 'UNAUTHORIZED');
      expect(missing.body.error.message).toBe('Missing API key. Send it in the X-API-Key header.');
      const unknown = await centralRequest(s, 'GET', '/boletos', undefined, { 'x-api-key': 'ck_not-a-key' });
      expectError(unknown, 401, 'UNAUTHORIZED');
      expect(unknown.body.error.message).toBe('Invalid API key');
      const inactive = await centralClient(s);
      await s.ctx.db.query('UPDATE central_api_keys SET active = false WHERE id = $1', [inactive.keyId]);
      const res = await inactive.call('GET', '/boletos');
      expectError(res, 401, 'UNAUTHORIZED');
      expect(res.body.error.message).toBe('API key is inactive');
    });

    it('a key of the external API or the admin token is not a central key', async () => {
      const res = await centralRequest(s, 'GET', '/health', undefined, { authorization: 'Bearer test-admin-token-0123456789' });
      expectError(res, 401, 'UNAUTHORIZED');
    });

    it('401 comes before validation: nothing is created without a key', async () => {
      const res = await centralRequest(s, 'POST', '/boletos', { boleto: boletoInput(clock) });
      expectError(res, 401, 'UNAUTHORIZED');
    });
  });

  describe('envelope', () => {
    it('success carries data and the request id; a given X-Request-Id is echoed', async () => {
      const res = await client.call('GET', '/health', undefined, { 'x-request-id': 'erp-req-42' });
      expect(res.status).toBe(200);
      expect(res.headers.get('x-request-id')).toBe('erp-req-42');
      expect(res.body).toEqual({ success: true, data: { status: 'ok', app_env: 'local', time: new Date(T0).toISOString() }, meta: { request_id: 'erp-req-42' } });
    });

    it('an unknown path under the prefix is 404 in the envelope; the rest of the app keeps its shapes', async () => {
      expectError(await client.call('GET', '/boletoz'), 404, 'NOT_FOUND');
      expectError(await client.call('PUT', '/boletos/123'), 404, 'NOT_FOUND');
      const admin = await s.admin('GET', '/nothing-here');
      expect(admin.body).toEqual({ errors: { not_found: 'route not found' } });
      const root = await fetch(`${s.url}/api/v1/other`);
      expect(await root.json()).toEqual({ errors: { not_found: 'route not found' } });
    });
  });

  describe('POST /boletos', () => {
    it('201 with a FEBRABAN barcode and linha digitável that carry the amount, due date and nosso_numero', async () => {
      const input = boletoInput(clock, { amount_cents: 123_456, payer_document: '529.982.247-25' });
      const res = await client.call('POST', '/boletos', { boleto: input });
      expect(res.status).toBe(201);
      const b = res.body.data;
      expect(b).toEqual({
        nosso_numero: input.nosso_numero,
        status: 'registered',
        amount_cents: 123_456,
        due_date: input.due_date,
        payer_document: '52998224725',
        payer_name: 'Maria da Silva',
        beneficiary_ispb: '60746948',
        beneficiary_name: 'Escola Horizonte Ltda',
        beneficiary_account_id: null,
        barcode: expect.stringMatching(/^\d{44}$/),
        linha_digitavel: expect.stringMatching(/^\d{47}$/),
        linha_digitavel_formatted: formatLinhaDigitavel(b.linha_digitavel),
        paid_at: null,
        cancelled_at: null,
        settlement_id: null,
        settled_at: null,
        created_at: new Date(T0).toISOString(),
        updated_at: new Date(T0).toISOString(),
      });
      expect(isValidBarcode(b.barcode)).toBe(true);
      expect(linhaDigitavelToBarcode(b.linha_digitavel)).toBe(b.barcode);
      expect(b.barcode.slice(0, 4)).toBe(`${BANK_CODE}9`);
      expect(b.barcode.slice(5, 9)).toBe(String(dueDateFactor(input.due_date)));
      expect(b.barcode.slice(9, 19)).toBe('0000123456');
      expect(b.barcode.slice(19)).toBe(freeField(client.keyId, input.nosso_numero));
    });

    it('400 with a field map for unknown fields, bad dates, bad amounts, bad documents and bad formats', async () => {
      const res = await client.call('POST', '/boletos', {
        boleto: {
          nosso_numero: '12A4',
          amount_cents: 10.5,
          due_date: '2026-02-30',
          payer_document: '12345678900',
          payer_name: '   ',
          beneficiary_ispb: '6074694',
          beneficiary_name: 'x'.repeat(201),
          discount: 5,
        },
        extra: true,
      });
      expectError(res, 400, 'VALIDATION_ERROR');
      expect(res.body.error.details).toEqual({
        fields: {
          'boleto.nosso_numero': ['must be 1 to 17 digits'],
          'boleto.amount_cents': ['must be an integer'],
          'boleto.due_date': ['must be a date in the format YYYY-MM-DD'],
          'boleto.payer_document': ['has invalid check digits'],
          'boleto.payer_name': ["can't be blank"],
          'boleto.beneficiary_ispb': ['must be 8 digits'],
          'boleto.beneficiary_name': ['is too long (maximum is 200 characters)'],
          'boleto.discount': ['is not a permitted field'],
          extra: ['is not a permitted field'],
        },
      });
    });

    it('400 for each non-positive, fractional, non-numeric or too large amount', async () => {
      for (const [amount, message] of [
        [0, 'must be greater than or equal to 1'],
        [-100, 'must be greater than or equal to 1'],
        [99.9, 'must be an integer'],
        ['1000', 'must be a number'],
        [null, 'must be a number'],
        [10_000_000_000, 'must be less than or equal to 9999999999'],
      ] as const) {
        const res = await client.call('POST', '/boletos', { boleto: boletoInput(clock, { amount_cents: amount }) });
        expectError(res, 400, 'VALIDATION_ERROR');
        expect([amount, res.body.error.details.fields]).toEqual([amount, { 'boleto.amount_cents': [message] }]);
      }
    });

    it('400 for a due date in the past, beyond 5,500 days, or not a calendar date', async () => {
      const range = `must be between ${today} and ${addDays(today, 5500)}`;
      for (const [dueDate, message] of [
        [addDays(today, -1), range],
        [addDays(today, 5501), range],
        ['10/04/2026', 'must be a date in the format YYYY-MM-DD'],
        ['2026-04-10T00:00:00Z', 'must be a date in the format YYYY-MM-DD'],
      ] as const) {
        const res = await client.call('POST', '/boletos', { boleto: boletoInput(clock, { due_date: dueDate }) });
        expectError(res, 400, 'VALIDATION_ERROR');
        expect(res.body.error.details.fields).toEqual({ 'boleto.due_date': [message] });
      }
      expect((await client.call('POST', '/boletos', { boleto: boletoInput(clock, { due_date: today }) })).status).toBe(201);
      expect((await client.call('POST', '/boletos', { boleto: boletoInput(clock, { due_date: addDays(today, 5500) }) })).status).toBe(201);
    });

    it('400 for payer documents of the wrong length or check digits; CNPJ with punctuation is accepted', async () => {
      for (const [doc, message] of [
        ['1234567890', 'must be a CPF (11 digits) or a CNPJ (14 characters: 12 digits or upper-case letters and 2 check digits)'],
        ['111.111.111-11', 'has invalid check digits'],
        ['11.222.333/0001-80', 'has invalid check digits'],
        ['abc', 'must be a CPF (11 digits) or a CNPJ (14 characters: 12 digits or upper-case letters and 2 check digits)'],
      ]) {
        const res = await client.call('POST', '/boletos', { boleto: boletoInput(clock, { payer_document: doc }) });
        expect([doc, res.body.error?.details.fields]).toEqual([doc, { 'boleto.payer_document': [message] }]);
      }
      expect((await create({ payer_document: '11.222.333/0001-81' })).payer_document).toBe('11222333000181');
    });

    it('400 for a missing or non-object body, 400 INVALID_JSON, 415 for another content type', async () => {
      expect((await client.call('POST', '/boletos', {})).body.error.details.fields).toEqual({ boleto: ['is required'] });
      expect((await client.call('POST', '/boletos', '')).body.error.details.fields).toEqual({ body: ['is required'] });
      expect((await client.call('POST', '/boletos', [])).body.error.details.fields).toEqual({ body: ['must be a JSON object'] });
      expectError(await client.call('POST', '/boletos', '{"boleto": '), 400, 'INVALID_JSON');
      expectError(await client.call('POST', '/boletos', 'boleto=1', { 'content-type': 'application/x-www-form-urlencoded' }), 415, 'UNSUPPORTED_MEDIA_TYPE');
      expectError(await client.call('POST', '/boletos', '{}', { 'content-type': 'text/plain' }), 415, 'UNSUPPORTED_MEDIA_TYPE');
    });

    it('409 for a nosso_numero the key already used, also when written with leading zeros', async () => {
      const first = await create({ nosso_numero: '4242' });
      const dup = await client.call('POST', '/boletos', { boleto: boletoInput(clock, { nosso_numero: '4242' }) });
      expectError(dup, 409, 'BOLETO_ALREADY_EXISTS');
      expect(dup.body.error.details).toEqual({ nosso_numero: '4242' });
      expectError(await client.call('POST', '/boletos', { boleto: boletoInput(clock, { nosso_numero: '0004242' }) }), 409, 'BOLETO_ALREADY_EXISTS');
      // Another key has its own numbering.
      const other = await centralClient(s);
      const mine = await create({ nosso_numero: '4242' }, other);
      expect(mine.barcode).not.toBe(first.barcode);
    });

    it('own-institution beneficiary: credited account taken from the key; 422 when the key has none', async () => {
      const ispb = s.ctx.config.institutionIspb;
      const refused = await client.call('POST', '/boletos', { boleto: boletoInput(clock, { beneficiary_ispb: ispb }) });
      expectError(refused, 422, 'BENEFICIARY_ACCOUNT_REQUIRED');
      const accountId = await newAccount(s);
      const withAccount = await centralClient(s, { accountId });
      expect((await create({ beneficiary_ispb: ispb }, withAccount)).beneficiary_account_id).toBe(accountId);
      // A boleto of another institution's beneficiary is not credited to the key's account.
      expect((await create({ beneficiary_ispb: '00000000' }, withAccount)).beneficiary_account_id).toBeNull();
    });
  });

  describe('GET /boletos and GET /boletos/:nosso_numero', () => {
    let reader: CentralClient;
    const numbers: string[] = [];
    beforeAll(async () => {
      reader = await centralClient(s);
      for (let i = 0; i < 5; i++) numbers.push((await create({ amount_cents: 100 + i }, reader)).nosso_numero);
      await reader.call('POST', `/boletos/${numbers[1]}/pay`);
      await reader.call('DELETE', `/boletos/${numbers[2]}`);
    });

    it('lists the key’s boletos newest first with a count', async () => {
      const res = await reader.call('GET', '/boletos');
      expect(res.status).toBe(200);
      expect(res.body.data.map((b: { nosso_numero: string }) => b.nosso_numero)).toEqual([...numbers].reverse());
      expect(res.body.meta).toEqual({ request_id: expect.any(String), count: 5, next_cursor: null });
    });

    it('filters by a comma-separated nosso_numero list and by status', async () => {
      const res = await reader.call('GET', `/boletos?nosso_numero=${numbers[0]},${numbers[3]}, 999999`);
      expect(res.body.data.map((b: { nosso_numero: string }) => b.nosso_numero)).toEqual([numbers[3], numbers[0]]);
      const paid = await reader.call('GET', '/boletos?status=paid');
      expect(paid.body.data.map((b: { nosso_numero: string }) => b.nosso_numero)).toEqual([numbers[1]]);
      const cancelled = await reader.call('GET', `/boletos?status=cancelled&nosso_numero=${numbers[2]}`);
      expect(cancelled.body.data).toHaveLength(1);
    });

    it('pages with limit and the opaque next_cursor', async () => {
      const seen: string[] = [];
      let cursor: string | null = null;
      let pages = 0;
      do {
        const page: { body: any } = await reader.call('GET', `/boletos?limit=2${cursor ? `&cursor=${cursor}` : ''}`);
        seen.push(...page.body.data.map((b: { nosso_numero: string }) => b.nosso_numero));
        cursor = page.body.meta.next_cursor;
        pages++;
      } while (cursor);
      expect(seen).toEqual([...numbers].reverse());
      expect(pages).toBe(3);
    });

    it('400 for bad query parameters', async () => {
      for (const [query, field, message] of [
        ['limit=0', 'limit', 'must be greater than or equal to 1'],
        ['limit=101', 'limit', 'must be less than or equal to 100'],
        ['limit=ten', 'limit', 'must be an integer'],
        ['status=overdue', 'status', 'must be one of: registered, paid, settled, cancelled'],
        ['cursor=bm9wZQ', 'cursor', 'is not a cursor returned by this API'],
        ['nosso_numero=12,abc', 'nosso_numero.1', 'must be 1 to 17 digits'],
        ['page=2', 'page', 'is not a permitted field'],
      ]) {
        const res = await reader.call('GET', `/boletos?${query}`);
        expectError(res, 400, 'VALIDATION_ERROR');
        expect([query, res.body.error.details.fields]).toEqual([query, { [field!]: [message] }]);
      }
    });

    it('reads one boleto; 404 for an unknown one or another key’s; 400 for a malformed number', async () => {
      const res = await reader.call('GET', `/boletos/${numbers[1]}`);
      expect(res.status).toBe(200);
      expect(res.body.data).toMatchObject({ nosso_numero: numbers[1], status: 'paid', paid_at: new Date(T0).toISOString() });
      expectError(await reader.call('GET', '/boletos/31415926'), 404, 'NOT_FOUND');
      expectError(await client.call('GET', `/boletos/${numbers[1]}`), 404, 'NOT_FOUND');
      expect((await client.call('GET', `/boletos?nosso_numero=${numbers[1]}`)).body.data).toEqual([]);
      const bad = await reader.call('GET', '/boletos/12.5');
      expectError(bad, 400, 'VALIDATION_ERROR');
      expect(bad.body.error.details.fields).toEqual({ nosso_numero: ['must be 1 to 17 digits'] });
      expectError(await reader.call('GET', '/boletos/123456789012345678'), 400, 'VALIDATION_ERROR');
    });
  });

  describe('PATCH /boletos/:nosso_numero', () => {
    it('changes amount and due date before payment, with a new barcode and line', async () => {
      const b = await create();
      const dueDate = addDays(today, 60);
      const res = await client.call('PATCH', `/boletos/${b.nosso_numero}`, { boleto: { amount_cents: 20_000, due_date: dueDate } });
      expect(res.status).toBe(200);
      expect(res.body.data).toMatchObject({ nosso_numero: b.nosso_numero, status: 'registered', amount_cents: 20_000, due_date: dueDate });
      expect(res.body.data.barcode).not.toBe(b.barcode);
      expect(res.body.data.barcode.slice(5, 19)).toBe(`${dueDateFactor(dueDate)}0000020000`);
      expect(linhaDigitavelToBarcode(res.body.data.linha_digitavel)).toBe(res.body.data.barcode);
      const amountOnly = await client.call('PATCH', `/boletos/${b.nosso_numero}`, { boleto: { amount_cents: 1 } });
      expect(amountOnly.body.data).toMatchObject({ amount_cents: 1, due_date: dueDate });
    });

    it('400 for an empty change, for fields that cannot change and for bad values; 404 for an unknown boleto', async () => {
      const b = await create();
      const empty = await client.call('PATCH', `/boletos/${b.nosso_numero}`, { boleto: {} });
      expect(empty.body.error.details.fields).toEqual({ boleto: ['must change amount_cents or due_date'] });
      const frozen = await client.call('PATCH', `/boletos/${b.nosso_numero}`, { boleto: { payer_name: 'Outro', nosso_numero: '1' } });
      expect(frozen.body.error.details.fields).toEqual({
        'boleto.payer_name': ['is not a permitted field'],
        'boleto.nosso_numero': ['is not a permitted field'],
        boleto: ['must change amount_cents or due_date'],
      });
      const bad = await client.call('PATCH', `/boletos/${b.nosso_numero}`, { boleto: { amount_cents: -1, due_date: addDays(today, -3) } });
      expect(bad.body.error.details.fields).toEqual({ 'boleto.amount_cents': ['must be greater than or equal to 1'] });
      const past = await client.call('PATCH', `/boletos/${b.nosso_numero}`, { boleto: { due_date: addDays(today, -3) } });
      expect(past.body.error.details.fields).toEqual({ 'boleto.due_date': [`must be between ${today} and ${addDays(today, 5500)}`] });
      expectError(await client.call('PATCH', '/boletos/777777777', { boleto: { amount_cents: 5 } }), 404, 'NOT_FOUND');
      expect((await client.call('GET', `/boletos/${b.nosso_numero}`)).body.data.amount_cents).toBe(b.amount_cents);
    });

    it('409 after payment and after cancellation', async () => {
      const paid = await create();
      await client.call('POST', `/boletos/${paid.nosso_numero}/pay`);
      const res = await client.call('PATCH', `/boletos/${paid.nosso_numero}`, { boleto: { amount_cents: 5 } });
      expectError(res, 409, 'BOLETO_NOT_MODIFIABLE');
      expect(res.body.error.details).toEqual({ status: 'paid' });
      const cancelled = await create();
      await client.call('DELETE', `/boletos/${cancelled.nosso_numero}`);
      expectError(await client.call('PATCH', `/boletos/${cancelled.nosso_numero}`, { boleto: { amount_cents: 5 } }), 409, 'BOLETO_NOT_MODIFIABLE');
    });
  });

  describe('DELETE /boletos/:nosso_numero', () => {
    it('cancels a registered boleto; a repeat answers the cancelled boleto again', async () => {
      const b = await create();
      const res = await client.call('DELETE', `/boletos/${b.nosso_numero}`);
      expect(res.status).toBe(200);
      expect(res.body.data).toMatchObject({ status: 'cancelled', cancelled_at: new Date(T0).toISOString() });
      const again = await client.call('DELETE', `/boletos/${b.nosso_numero}`);
      expect(again.status).toBe(200);
      expect(again.body.data).toEqual(res.body.data);
    });

    it('409 for a paid boleto; 404 for an unknown one', async () => {
      const b = await create();
      await client.call('POST', `/boletos/${b.nosso_numero}/pay`);
      const res = await client.call('DELETE', `/boletos/${b.nosso_numero}`);
      expectError(res, 409, 'BOLETO_NOT_CANCELLABLE');
      expect(res.body.error.details).toEqual({ status: 'paid' });
      expectError(await client.call('DELETE', '/boletos/5550001'), 404, 'NOT_FOUND');
    });
  });

  describe('POST /boletos/:nosso_numero/pay', () => {
    it('records the payment once: repeats answer the paid boleto and move no more money', async () => {
      const before = await bookBalance(s, INSTITUTION_BOOK.boletoClearing);
      const b = await create({ amount_cents: 4_321 });
      const first = await client.call('POST', `/boletos/${b.nosso_numero}/pay`);
      expect(first.status).toBe(200);
      expect(first.body.data).toMatchObject({ status: 'paid', paid_at: new Date(T0).toISOString() });
      clock.advance(1000);
      const answers = await Promise.all([
        client.call('POST', `/boletos/${b.nosso_numero}/pay`),
        client.call('POST', `/boletos/${b.nosso_numero}/pay`, { amount_cents: 4_321 }),
        client.call('POST', `/boletos/${b.nosso_numero}/pay`, '', { 'content-type': 'application/json' }),
      ]);
      for (const again of answers) {
        expect(again.status).toBe(200);
        expect(again.body.data).toEqual(first.body.data);
      }
      expect(await bookBalance(s, INSTITUTION_BOOK.boletoClearing)).toBe(before + 432_100);
      const postings = await s.ctx.db.query("SELECT id FROM ledger_transactions WHERE kind = 'boleto_payment' AND reference = (SELECT 'boleto:' || id FROM boletos WHERE barcode = $1)", [b.barcode]);
      expect(postings).toHaveLength(1);
      expect(await ledgerSum(s)).toBe(0);
    });

    it('422 when amount_cents differs; 409 for a cancelled boleto; 400 for unknown fields; 404 for an unknown one', async () => {
      const b = await create({ amount_cents: 1_000 });
      const mismatch = await client.call('POST', `/boletos/${b.nosso_numero}/pay`, { amount_cents: 999 });
      expectError(mismatch, 422, 'PAYMENT_MISMATCH');
      expect(mismatch.body.error.details).toEqual({ amount_cents: 1_000 });
      const extra = await client.call('POST', `/boletos/${b.nosso_numero}/pay`, { paid_by: 'me' });
      expect(extra.body.error.details.fields).toEqual({ paid_by: ['is not a permitted field'] });
      expect((await client.call('GET', `/boletos/${b.nosso_numero}`)).body.data.status).toBe('registered');
      const cancelled = await create();
      await client.call('DELETE', `/boletos/${cancelled.nosso_numero}`);
      expectError(await client.call('POST', `/boletos/${cancelled.nosso_numero}/pay`), 409, 'BOLETO_NOT_PAYABLE');
      expectError(await client.call('POST', '/boletos/8080808/pay'), 404, 'NOT_FOUND');
    });
  });
});

describe('boleto central API without its database', () => {
  it('answers 503 in the envelope, with the rate-limit headers', async () => {
    const s = await startTestServer({ workers: false });
    try {
      const c = await centralClient(s);
      await s.database.db.close();
      const res = await c.call('GET', '/health');
      expect(res.status).toBe(503);
      expect(res.body.error).toEqual({ code: 'SERVICE_UNAVAILABLE', message: expect.any(String), details: {} });
      expect(res.headers.get('x-ratelimit-limit')).toBe('1000');
    } finally {
      await s.close();
    }
  });
});
