import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { BrCodeError, crc16, decodeBrCode, encodeBrCode, formatAmount, parseAmount } from '../../src/lib/brcode.js';
import { crcCcittFalse, emvFields } from '../helpers/emv.js';

// Static example of the central bank's "Manual de Padrões para Iniciação do Pix" (BR Code section).
const BCB_STATIC_EXAMPLE =
  '00020126580014br.gov.bcb.pix0136123e4567-e12b-12d1-a456-4266554400005204000053039865802BR5913Fulano de Tal6008BRASILIA62070503***63041D3D';

describe('BR Code', () => {
  it('decodes the central bank manual’s static example and verifies its CRC', () => {
    expect(crc16(BCB_STATIC_EXAMPLE.slice(0, -4))).toBe('1D3D');
    // The independent CRC agrees, and gives the standard check value of CRC-16/CCITT-FALSE.
    expect(crcCcittFalse(BCB_STATIC_EXAMPLE.slice(0, -4))).toBe('1D3D');
    expect(crcCcittFalse('123456789')).toBe('29B1');
    const d = decodeBrCode(BCB_STATIC_EXAMPLE);
    expect(d).toMatchObject({
      key: '123e4567-e12b-12d1-a456-426655440000',
      amountCents: null,
      merchantName: 'Fulano de Tal',
      merchantCity: 'BRASILIA',
      txid: null,
      singleUse: false,
    });
  });

  it('refuses a payload whose CRC or structure is wrong', () => {
    expect(() => decodeBrCode(BCB_STATIC_EXAMPLE.slice(0, -1) + 'E')).toThrow('CRC does not match');
    const noGui = encodeBrCode({ key: 'a@b.co', merchantName: 'X', merchantCity: 'Y' }).replace('br.gov.bcb.pix', 'br.gov.bcb.pux');
    const fixed = noGui.slice(0, -4) + crc16(noGui.slice(0, -4));
    expect(() => decodeBrCode(fixed)).toThrow('GUI must be br.gov.bcb.pix');
    expect(() => decodeBrCode('not a br code at all, no, not at all')).toThrow(BrCodeError);
  });

  it('amounts are integer cents with two decimals in the text', () => {
    expect(formatAmount(1)).toBe('0.01');
    expect(formatAmount(1590)).toBe('15.90');
    expect(formatAmount(100_000_00)).toBe('100000.00');
    expect(parseAmount('15.9')).toBe(1590);
    expect(parseAmount('15')).toBe(1500);
    expect(parseAmount('15.901')).toBeNull();
    expect(parseAmount('-1.00')).toBeNull();
  });

  it('encode then decode gives back every field (property)', () => {
    const name = fc.stringMatching(/^[A-Z][A-Z0-9 ]{0,23}[A-Z0-9]$/).filter((s) => !/\s{2}/.test(s));
    const city = fc.stringMatching(/^[A-Z][A-Z ]{0,13}[A-Z]$/).filter((s) => !/\s{2}/.test(s));
    fc.assert(
      fc.property(
        fc.oneof(fc.uuid().map((u) => u.toLowerCase()), fc.emailAddress().filter((e) => e.length <= 77), fc.stringMatching(/^\+55\d{11}$/)),
        fc.option(fc.integer({ min: 1, max: 10_000_000_00 }), { nil: undefined }),
        fc.option(fc.stringMatching(/^[A-Za-z0-9]{1,25}$/), { nil: undefined }),
        name,
        city,
        fc.boolean(),
        (key, amountCents, txid, merchantName, merchantCity, singleUse) => {
          const code = encodeBrCode({ key, amountCents, txid, merchantName, merchantCity, singleUse });
          const d = decodeBrCode(code);
          expect(d).toMatchObject({ key, amountCents: amountCents ?? null, txid: txid ?? null, merchantName, merchantCity, singleUse });
          // The independent decoder agrees on the layout and the CRC.
          const f = emvFields(code);
          expect(f.get('00')).toBe('01');
          expect(emvFields(f.get('26')!).get('00')).toBe('br.gov.bcb.pix');
          expect(emvFields(f.get('26')!).get('01')).toBe(key);
          expect(f.get('53')).toBe('986');
          expect(f.get('58')).toBe('BR');
          expect(f.get('54')).toBe(amountCents === undefined ? undefined : formatAmount(amountCents));
          expect(emvFields(f.get('62')!).get('05')).toBe(txid ?? '***');
          expect(f.get('63')).toBe(crcCcittFalse(code.slice(0, -4)));
          expect([...f.keys()].at(-1)).toBe('63');
        },
      ),
    );
  });

  it('limits merchant name to 25 and city to 15 characters, without accents', () => {
    const code = encodeBrCode({ key: 'k@x.io', merchantName: 'Padaria São João do Centro Histórico', merchantCity: 'São José dos Campos', amountCents: 500 });
    const d = decodeBrCode(code);
    expect(d.merchantName).toBe('Padaria Sao Joao do Centr');
    expect(d.merchantCity).toBe('Sao Jose dos Ca');
  });
});
