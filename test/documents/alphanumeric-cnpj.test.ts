import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createBoleto } from '../../src/boleto/schemas.js';
import { cnpjCheckDigits, cnpjProblem, isValidCnpj, isValidDocument, normalizeDocument, readDocument } from '../../src/lib/documents.js';
import { brCodeKey, detectPixKeyType, normalizePixKey } from '../../src/pix/keys.js';
import { merchantWithKey, type MerchantFixture } from '../helpers/client.js';
import { BACKENDS } from '../helpers/db.js';
import { validAlphanumericCnpj } from '../helpers/fixtures.js';
import { SIM_FAST, sandbox } from '../helpers/pix.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

/** The federal revenue's published example of an alphanumeric CNPJ. */
const EXAMPLE = '12ABC34501DE35';
const ALNUM = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ'.split('');
const base12 = fc.array(fc.constantFrom(...ALNUM), { minLength: 12, maxLength: 12 }).map((c) => c.join(''));
const validAlnum = base12.map((b) => b + cnpjCheckDigits(b)).filter((c) => !/^(.)\1{13}$/.test(c));
const punctuate = (c: string) => `${c.slice(0, 2)}.${c.slice(2, 5)}.${c.slice(5, 8)}/${c.slice(8, 12)}-${c.slice(12)}`;

/** The pre-2026 rule, written independently: digits only, weights over the digits' values. */
function oldNumericRule(cnpj: string): boolean {
  if (!/^\d{14}$/.test(cnpj) || /^(\d)\1{13}$/.test(cnpj)) return false;
  const digit = (n: number) => {
    const weights = n === 12 ? [5, 4, 3, 2, 9, 8, 7, 6, 5, 4, 3, 2] : [6, 5, 4, 3, 2, 9, 8, 7, 6, 5, 4, 3, 2];
    const r = weights.reduce((s, w, i) => s + w * Number(cnpj[i]), 0) % 11;
    return r < 2 ? 0 : 11 - r;
  };
  return digit(12) === Number(cnpj[12]) && digit(13) === Number(cnpj[13]);
}

describe('alphanumeric CNPJ (lib/documents.ts)', () => {
  it("accepts the revenue's example bare, punctuated and in lower case; refuses its neighbours", () => {
    expect(cnpjCheckDigits('12ABC34501DE')).toBe('35');
    for (const spelling of [EXAMPLE, '12.ABC.345/01DE-35', '12abc34501de35', '12.abc.345/01de-35', ' 12ABC34501DE35 ']) {
      expect([spelling, readDocument(spelling)]).toEqual([spelling, { kind: 'cnpj', value: EXAMPLE }]);
    }
    expect(cnpjProblem('12ABC34501DE36')).toBe('invalid_check_digits');
    expect(cnpjProblem('12ABC34501DF35')).toBe('invalid_check_digits');
    expect(cnpjProblem('12ABC34501DEA5')).toBe('invalid_characters'); // check digits are numeric
    expect(cnpjProblem('12ABC34501DE3')).toBe('wrong_length');
    expect(cnpjProblem('12ABC3450#DE35')).toBe('invalid_characters');
    expect(cnpjProblem('12ÁBC34501DE35')).toBe('invalid_characters');
    expect(cnpjProblem('00000000000000')).toBe('repeated_digits');
    expect(readDocument('12ABC34501DE3')).toEqual({ problem: 'wrong_length', kind: null });
  });

  it('old numeric CNPJs and CPFs keep working', () => {
    expect(readDocument('11.222.333/0001-81')).toEqual({ kind: 'cnpj', value: '11222333000181' });
    expect(isValidCnpj('11222333000182')).toBe(false);
    expect(readDocument('529.982.247-25')).toEqual({ kind: 'cpf', value: '52998224725' });
    expect(readDocument('52998224724')).toEqual({ problem: 'invalid_check_digits', kind: 'cpf' });
  });

  it('the canonical spelling (operator and sandbox APIs) is 11 digits or 14 upper-case characters', () => {
    expect(normalizeDocument(EXAMPLE, { canonical: true })).toBe(EXAMPLE);
    expect(normalizeDocument('12abc34501de35', { canonical: true })).toBeNull();
    expect(normalizeDocument('12.ABC.345/01DE-35', { canonical: true })).toBeNull();
    expect(isValidDocument(EXAMPLE)).toBe(true);
    expect(isValidDocument('12abc34501de35')).toBe(false);
  });

  it('property: every 12-character base with its computed digits is valid in every accepted spelling', () => {
    fc.assert(
      fc.property(validAlnum, (cnpj) => {
        for (const spelling of [cnpj, punctuate(cnpj), cnpj.toLowerCase(), punctuate(cnpj).toLowerCase()]) {
          expect(readDocument(spelling)).toEqual({ kind: 'cnpj', value: cnpj });
        }
        expect(normalizePixKey('cnpj', punctuate(cnpj).toLowerCase())).toBe(cnpj);
      }),
    );
  });

  it('property: a wrong check digit is always refused', () => {
    fc.assert(
      fc.property(validAlnum, fc.integer({ min: 12, max: 13 }), fc.integer({ min: 1, max: 9 }), (cnpj, at, delta) => {
        const changed = cnpj.slice(0, at) + ((Number(cnpj[at]) + delta) % 10) + cnpj.slice(at + 1);
        expect(isValidCnpj(changed)).toBe(false);
      }),
    );
  });

  it('property: the validator is the revenue rule (an independent oracle) on any 12 characters + 2 digits, mutated or not', () => {
    const oracle = (c: string) => {
      const sum = (n: number, weights: number[]) => weights.reduce((acc, w, i) => acc + w * (c.charCodeAt(i) - 48), 0) % 11;
      const dv = (r: number) => (r < 2 ? 0 : 11 - r);
      return dv(sum(12, [5, 4, 3, 2, 9, 8, 7, 6, 5, 4, 3, 2])) === Number(c[12]) && dv(sum(13, [6, 5, 4, 3, 2, 9, 8, 7, 6, 5, 4, 3, 2])) === Number(c[13]);
    };
    const digit = fc.constantFrom(...'0123456789'.split(''));
    const candidate = fc.oneof(
      fc.tuple(base12, digit, digit).map(([b, d1, d2]) => b + d1 + d2),
      fc.tuple(validAlnum, fc.integer({ min: 0, max: 11 }), fc.constantFrom(...ALNUM)).map(([c, at, r]) => c.slice(0, at) + r + c.slice(at + 1)),
    );
    fc.assert(
      fc.property(candidate, (c) => {
        expect(isValidCnpj(c)).toBe(oracle(c) && !/^(.)\1{13}$/.test(c));
      }),
      { numRuns: 2000 },
    );
  });

  it('one changed base character is caught at least 9 times in 10 (mod 11 misses value differences of 11)', () => {
    let caught = 0;
    let total = 0;
    fc.assert(
      fc.property(validAlnum, fc.integer({ min: 0, max: 11 }), fc.constantFrom(...ALNUM), (cnpj, at, replacement) => {
        if (replacement === cnpj[at]) return;
        total++;
        if (!isValidCnpj(cnpj.slice(0, at) + replacement + cnpj.slice(at + 1))) caught++;
      }),
      { numRuns: 2000 },
    );
    expect(caught / total).toBeGreaterThan(0.9);
  });

  it('property: on all-digit CNPJs the new rule is exactly the old one', () => {
    fc.assert(
      fc.property(fc.stringMatching(/^\d{12}$/), fc.stringMatching(/^\d{2}$/), (twelve, two) => {
        expect(isValidCnpj(twelve + two)).toBe(oldNumericRule(twelve + two));
        expect(isValidCnpj(twelve + cnpjCheckDigits(twelve))).toBe(oldNumericRule(twelve + cnpjCheckDigits(twelve)));
      }),
    );
  });

  it('PIX keys: an alphanumeric CNPJ is detected as a CNPJ key, also inside a BR Code', () => {
    expect(detectPixKeyType(EXAMPLE)).toEqual({ type: 'cnpj' });
    expect(detectPixKeyType('12.abc.345/01de-35')).toEqual({ type: 'cnpj' });
    expect(brCodeKey(EXAMPLE)).toEqual({ key: EXAMPLE, type: 'cnpj' });
    expect(normalizePixKey('cnpj', '12ABC34501DE36')).toBeNull();
    expect(detectPixKeyType('11222333000181')).toEqual({ type: 'cnpj' });
  });

  it('boleto payers: alphanumeric CNPJ accepted, stored canonical', () => {
    const boleto = { nosso_numero: '1', amount_cents: 100, due_date: '2026-12-01', payer_name: 'Empresa', beneficiary_ispb: '18236120', beneficiary_name: 'Banco' };
    expect(createBoleto.parse({ boleto: { ...boleto, payer_document: '12.abc.345/01de-35' } }).boleto.payer_document).toBe(EXAMPLE);
    expect(createBoleto.safeParse({ boleto: { ...boleto, payer_document: '12ABC34501DE36' } }).success).toBe(false);
  });
});

describe.each(BACKENDS)('alphanumeric CNPJ through the APIs on %s', (backend) => {
  let s: TestServer;
  let m: MerchantFixture;
  beforeAll(async () => {
    s = await startTestServer({ backend, env: SIM_FAST });
    m = await merchantWithKey(s, { depositCents: 100_000 });
  });
  afterAll(async () => s?.close());

  it('operator: a merchant with an alphanumeric CNPJ; lower case is not the canonical spelling', async () => {
    const document = validAlphanumericCnpj();
    const res = await s.admin('POST', '/merchants', { name: 'Empresa Nova', document });
    expect(res.status).toBe(201);
    expect(res.body.document).toBe(document);
    const [row] = await s.ctx.db.query<{ document: string }>('SELECT document FROM merchants WHERE id = $1', [res.body.merchant_id]);
    expect(row!.document).toBe(document);
    const lower = await s.admin('POST', '/merchants', { name: 'Empresa Nova', document: document.toLowerCase() });
    expect(lower.status).toBe(400);
    const wrong = await s.admin('POST', '/merchants', { name: 'Empresa Nova', document: document.slice(0, 12) + ((Number(document[12]) + 1) % 10) + document[13] });
    expect(wrong.body).toEqual({ errors: { bad_request: { document: ['has invalid check digits'] } } });
  });

  it("operator: an alphanumeric CNPJ PIX key of this institution, written with punctuation in lower case", async () => {
    const cnpj = validAlphanumericCnpj();
    const res = await s.admin('POST', '/pix-keys', { account_id: m.accountId, type: 'cnpj', key: punctuate(cnpj).toLowerCase() });
    expect(res.status, JSON.stringify(res.body)).toBe(201);
    expect(res.body.key).toBe(cnpj);
  });

  it('simulator directory + cash-out: pays an alphanumeric CNPJ key sent without its type', async () => {
    const cnpj = validAlphanumericCnpj();
    const reg = await sandbox(s, 'POST', '/dict/keys', { key: cnpj, type: 'cnpj', name: 'Fornecedor', document: cnpj, ispb: '18236120' });
    expect(reg.status, JSON.stringify(reg.body)).toBe(201);
    expect(reg.body).toMatchObject({ key: cnpj, type: 'cnpj', document: cnpj });
    const res = await m.client.post('/pix/cash-out', { amount: 500, pix_key: punctuate(cnpj).toLowerCase() });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    const [row] = await s.ctx.db.query<{ recipient_key: string; recipient_key_type: string }>(
      'SELECT recipient_key, recipient_key_type FROM transactions WHERE transaction_id = $1',
      [res.body.transaction_id],
    );
    expect(row).toEqual({ recipient_key: cnpj, recipient_key_type: 'cnpj' });
  });

  it('cash-in: an alphanumeric payer CNPJ is accepted and stored canonical (the database CHECK of migration 1100)', async () => {
    const cnpj = validAlphanumericCnpj();
    const res = await m.client.post('/pix/cash-in', { amount: 300, payer_document: punctuate(cnpj).toLowerCase() });
    expect(res.status, JSON.stringify(res.body)).toBe(201);
    expect(res.body.payer_document).toBe(cnpj);
    const bad = await m.client.post('/pix/cash-in', { amount: 300, payer_document: cnpj.slice(0, 13) + ((Number(cnpj[13]) + 1) % 10) });
    expect(bad.body).toEqual({ errors: { bad_request: { payer_document: ['must be a valid CPF (11 digits) or CNPJ (14 characters)'] } } });
  });
});
