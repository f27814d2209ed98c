import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BrCodeError, decodeBrCode, encodeBrCode } from '../../src/lib/brcode.js';
import { explainBrCode, type BrCodeExplanation } from '../../src/lib/brcodeExplain.js';
import { brCodeKey } from '../../src/pix/keys.js';
import { BACKENDS } from '../helpers/db.js';
import { crcCcittFalse, emvFields } from '../helpers/emv.js';
import { sandbox } from '../helpers/pix.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

/** Builds a payload from [id, value] pairs (lengths in characters) and closes it with a correct CRC (independent CRC). */
function assemble(fields: [string, string][], crc: (body: string) => string = crcCcittFalse): string {
  const body = fields.map(([id, v]) => `${id}${String([...v].length).padStart(2, '0')}${v}`).join('') + '6304';
  return body + crc(body);
}
const sub = (fields: [string, string][]) => fields.map(([id, v]) => `${id}${String([...v].length).padStart(2, '0')}${v}`).join('');
const KEY = '123e4567-e12b-42d1-a456-426655440000';
/** A correct static code's fields; tests change one thing each. */
function staticFields(over: Partial<Record<string, string | null>> = {}): [string, string][] {
  const base: Record<string, string> = {
    '00': '01',
    '26': sub([['00', 'br.gov.bcb.pix'], ['01', KEY]]),
    '52': '0000',
    '53': '986',
    '54': '10.00',
    '58': 'BR',
    '59': 'Fulano de Tal',
    '60': 'BRASILIA',
    '62': sub([['05', 'PEDIDO42']]),
  };
  const merged = { ...base, ...over };
  return Object.entries(merged).filter((e): e is [string, string] => e[1] !== null).sort(([a], [b]) => a.localeCompare(b));
}
const keyProblem = (k: string) => (brCodeKey(k) === null ? 'not a key' : null);
const explain = (p: string) => explainBrCode(p, { keyProblem });
const codes = (e: BrCodeExplanation) => e.findings.map((f) => `${f.field}:${f.severity}:${f.code}`);

describe('BR Code interoperability (lib/brcode.ts, lib/brcodeExplain.ts)', () => {
  it('a correct static code has no finding; the manual’s own example too', () => {
    expect(explain(assemble(staticFields()))).toMatchObject({ readable: true, interoperable: true, kind: 'static', findings: [] });
    const manual = '00020126580014br.gov.bcb.pix0136123e4567-e12b-12d1-a456-4266554400005204000053039865802BR5913Fulano de Tal6008BRASILIA62070503***63041D3D';
    expect(codes(explainBrCode(manual))).toEqual([]);
  });

  it('accents in name and city: readable by pixgate, flagged for other banks, with the fix', () => {
    const e = explain(assemble(staticFields({ '59': 'Padaria São João', '60': 'São Paulo' })));
    expect(e.readable).toBe(true);
    expect(codes(e)).toEqual(['payload:interop:non_ascii', '59:interop:accents', '60:interop:accents']);
    expect(e.findings[1]!.message).toContain('"Padaria Sao Joao"');
    // The encoder never writes them: NFD, combining marks removed, cut to the limits.
    const code = encodeBrCode({ key: KEY, merchantName: 'Confeitaria Ação & Coração Ltda', merchantCity: 'Florianópolis-SC', amountCents: 990 });
    expect(codes(explain(code))).toEqual([]);
    expect(emvFields(code).get('59')).toBe('Confeitaria Acao Coracao');
    expect(emvFields(code).get('60')).toBe('Florianopolis-S');
  });

  it('CRC: short (unpadded), lower case, wrong, missing, not last', () => {
    const unpadded = (body: string) => parseInt(crcCcittFalse(body), 16).toString(16).toUpperCase();
    // Find a payload whose CRC starts with 0, and write it without padding (the classic bug).
    let txid = 0;
    let body = '';
    for (;;) {
      body = assemble(staticFields({ '62': sub([['05', `T${txid}`]]) })).slice(0, -4);
      if (crcCcittFalse(body).startsWith('0')) break;
      txid++;
    }
    const short = body.slice(0, -2) + '03' + unpadded(body);
    expect(codes(explain(short))).toContain('63:error:wrong_length');
    const lower = body + crcCcittFalse(body).toLowerCase();
    const lowerFound = explain(lower);
    if (/[A-F]/.test(crcCcittFalse(body))) expect(codes(lowerFound)).toEqual(['63:interop:lower_case']);
    const wrong = body + (crcCcittFalse(body) === 'FFFF' ? '0000' : 'FFFF');
    expect(codes(explain(wrong))).toEqual(['63:error:mismatch']);
    expect(() => decodeBrCode(wrong)).toThrow(BrCodeError);
    expect(codes(explain(body.slice(0, -4)))).toContain('63:error:missing');
    expect(codes(explain(body + crcCcittFalse(body) + '9902XY'))).toContain('63:error:not_last');
  });

  it('lengths: name over 25, city over 15 (interop); a TLV length that runs past the end (error)', () => {
    const e = explain(assemble(staticFields({ '59': 'A'.repeat(26), '60': 'B'.repeat(16) })));
    expect(codes(e)).toEqual(['59:interop:too_long', '60:interop:too_long']);
    const good = assemble(staticFields());
    const broken = good.replace('5913Fulano de Tal', '5920Fulano de Tal');
    expect(explain(broken).readable).toBe(false);
    expect(codes(explain(broken))[0]).toBe('payload:error:malformed_tlv');
  });

  it('txid: "***" in a dynamic code; "***" or 1–25 letters and digits in a static one', () => {
    const dynamic = (txid: string) =>
      assemble(staticFields({ '26': sub([['00', 'br.gov.bcb.pix'], ['25', 'pix.example.com/qr/v2/cobv/abc']]), '54': null, '62': sub([['05', txid]]) }));
    expect(explain(dynamic('***'))).toMatchObject({ kind: 'dynamic', findings: [] });
    expect(codes(explain(dynamic('PEDIDO42')))).toEqual(['62.05:error:dynamic_txid']);
    expect(codes(explain(assemble(staticFields({ '62': sub([['05', 'pedido-42']]) }))))).toEqual(['62.05:error:invalid_txid']);
    expect(codes(explain(assemble(staticFields({ '62': sub([['05', 'A'.repeat(26)]]) }))))).toEqual(['62.05:error:invalid_txid']);
    expect(codes(explain(assemble(staticFields({ '62': sub([['05', '***']]) }))))).toEqual([]);
    expect(codes(explain(assemble(staticFields({ '62': null }))))).toEqual(['62:error:missing']);
    // The encoder refuses a txid in a dynamic code and writes the location without its scheme.
    expect(() => encodeBrCode({ url: 'pix.example.com/x', txid: 'ABC', merchantName: 'X', merchantCity: 'Y' })).toThrow('"***"');
    const code = encodeBrCode({ url: 'https://pix.example.com/qr/v2/cobv/abc', merchantName: 'X', merchantCity: 'Y' });
    expect(emvFields(emvFields(code).get('26')!).get('25')).toBe('pix.example.com/qr/v2/cobv/abc');
    expect(emvFields(emvFields(code).get('62')!).get('05')).toBe('***');
  });

  it('wrong GUI, key and URL together, neither, a key that is no PIX key', () => {
    expect(codes(explain(assemble(staticFields({ '26': sub([['00', 'br.gov.bcb.pux'], ['01', KEY]]) }))))).toEqual(['26.00:error:wrong_gui']);
    expect(codes(explain(assemble(staticFields({ '26': sub([['00', 'BR.GOV.BCB.PIX'], ['01', KEY]]) }))))).toEqual(['26.00:interop:gui_case']);
    expect(codes(explain(assemble(staticFields({ '26': sub([['00', 'br.gov.bcb.pix'], ['01', KEY], ['25', 'x.io/a']]) }))))).toEqual(['26:error:key_and_url', '62.05:error:dynamic_txid']);
    expect(codes(explain(assemble(staticFields({ '26': sub([['00', 'br.gov.bcb.pix']]) }))))).toEqual(['26:error:no_key_or_url']);
    expect(codes(explain(assemble(staticFields({ '26': sub([['00', 'br.gov.bcb.pix'], ['01', 'not a key']]) }))))).toEqual(['26.01:error:invalid_key']);
    expect(codes(explain(assemble(staticFields({ '26': sub([['00', 'br.gov.bcb.pix'], ['25', 'https://x.io/a']]), '62': sub([['05', '***']]) }))))).toEqual([
      '26.25:error:url_scheme',
    ]);
  });

  it('missing fields and wrong values: 00, 52, 53, 58, 59, 60, 26; amounts with a comma, one decimal, zero', () => {
    for (const [id, code] of [['52', '52:error:missing'], ['53', '53:error:missing'], ['58', '58:error:missing'], ['59', '59:error:missing'], ['60', '60:error:missing'], ['26', '26:error:missing']] as const) {
      expect([id, codes(explain(assemble(staticFields({ [id]: null }))))]).toEqual([id, [code]]);
    }
    expect(codes(explain(assemble(staticFields({ '00': '02' }))))).toEqual(['00:error:invalid_value']);
    expect(codes(explain(assemble(staticFields({ '53': '840' }))))).toEqual(['53:error:invalid_value']);
    expect(codes(explain(assemble(staticFields({ '58': 'br' }))))).toEqual(['58:error:invalid_value']);
    expect(codes(explain(assemble(staticFields({ '01': '13' }))))).toEqual(['01:error:invalid_value']);
    expect(codes(explain(assemble(staticFields({ '54': '10,00' }))))).toEqual(['54:error:comma']);
    expect(codes(explain(assemble(staticFields({ '54': '10.5' }))))).toEqual(['54:interop:decimals']);
    expect(codes(explain(assemble(staticFields({ '54': '0.00' }))))).toEqual(['54:error:zero']);
    expect(codes(explain(assemble(staticFields({ '54': '-1.00' }))))).toEqual(['54:error:invalid_value']);
    expect(codes(explain('not a br code'))).toEqual(['payload:error:malformed_tlv']);
  });

  it('property: whatever name, city, amount, txid and key the encoder is given, its code has no finding and decodes back', () => {
    const text = fc.string({ unit: fc.constantFrom(...'aáàâãAÁÇçéÉêíóôõúüñ &-.Zz09'.split('')), minLength: 1, maxLength: 40 }).filter((t) => /[A-Za-z0-9]/.test(t.normalize('NFD')));
    fc.assert(
      fc.property(
        fc.oneof(fc.uuid({ version: 4 }).map((u) => u.toLowerCase()), fc.constant('11222333000181'), fc.constant('12ABC34501DE35'), fc.constant('+5511987654321')),
        fc.option(fc.integer({ min: 1, max: 10_000_000_00 }), { nil: undefined }),
        fc.option(fc.stringMatching(/^[A-Za-z0-9]{1,25}$/), { nil: undefined }),
        text,
        text,
        (key, amountCents, txid, merchantName, merchantCity) => {
          const code = encodeBrCode({ key, amountCents, txid, merchantName, merchantCity });
          const e = explain(code);
          expect(e.findings).toEqual([]);
          const f = emvFields(code);
          expect(f.get('63')).toMatch(/^[0-9A-F]{4}$/);
          expect(f.get('63')).toBe(crcCcittFalse(code.slice(0, -4)));
          expect([...f.get('59')!].length).toBeLessThanOrEqual(25);
          expect([...f.get('60')!].length).toBeLessThanOrEqual(15);
          expect(decodeBrCode(code)).toMatchObject({ key, amountCents: amountCents ?? null, txid: txid ?? null });
        },
      ),
      { numRuns: 300 },
    );
  });

  it('property: any single character changed in a valid code is found (CRC mismatch or a field error)', () => {
    const code = encodeBrCode({ key: KEY, amountCents: 1234, txid: 'ABC123', merchantName: 'Loja', merchantCity: 'Recife' });
    fc.assert(
      fc.property(fc.integer({ min: 0, max: code.length - 5 }), fc.constantFrom(...'0123456789ABCDEFabcdef.*-'.split('')), (at, c) => {
        fc.pre(code[at] !== c);
        const changed = code.slice(0, at) + c + code.slice(at + 1);
        expect(explain(changed).readable).toBe(false);
      }),
    );
  });
});

describe.each(BACKENDS)('POST /api/sandbox/pix/brcode/explain on %s', (backend) => {
  let s: TestServer;
  beforeAll(async () => {
    s = await startTestServer({ backend, workers: false });
  });
  afterAll(async () => s?.close());

  it('answers the fields and the findings; 400 without an emv', async () => {
    const res = await sandbox(s, 'POST', '/pix/brcode/explain', { emv: assemble(staticFields({ '59': 'Açaí da Praça', '62': sub([['05', 'pedido 1']]) })) });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ readable: false, interoperable: false, kind: 'static' });
    expect(res.body.fields.find((f: any) => f.id === '59')).toEqual({ id: '59', length: 13, value: 'Açaí da Praça' });
    expect(res.body.findings).toEqual([
      { field: 'payload', severity: 'interop', code: 'non_ascii', message: expect.any(String) },
      { field: '59', severity: 'interop', code: 'accents', message: expect.stringContaining('"Acai da Praca"') },
      { field: '62.05', severity: 'error', code: 'invalid_txid', message: expect.any(String) },
    ]);
    const bad = await sandbox(s, 'POST', '/pix/brcode/explain', {});
    expect(bad.status).toBe(400);
    const key = await sandbox(s, 'POST', '/pix/brcode/explain', { emv: assemble(staticFields({ '26': sub([['00', 'br.gov.bcb.pix'], ['01', '12ABC34501DE36']]) })) });
    expect(key.body.findings.map((f: any) => f.code)).toEqual(['invalid_key']);
  });
});
