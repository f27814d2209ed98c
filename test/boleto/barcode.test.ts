import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  addDays,
  barcodeToLinhaDigitavel,
  buildBarcode,
  dueDateFactor,
  dueDateFromFactor,
  formatLinhaDigitavel,
  isCalendarDate,
  isValidBarcode,
  isValidLinhaDigitavel,
  linhaDigitavelToBarcode,
  MAX_AMOUNT_CENTS,
  MAX_DAYS_AHEAD,
  mod10,
  mod11,
  parseBarcode,
} from '../../src/boleto/barcode.js';

describe('FEBRABAN barcode and linha digitável', () => {
  /**
   * Published example boletos:
   * - Banco do Brasil, due 2007-12-31, R$ 1.00: barcode 00193373700000001000500940144816060680935031,
   *   linha digitável 00190.50095 40144.816069 06809.350314 3 37370000000100. Used as the valid
   *   barcode of mcrvaz/boleto-brasileiro-validator (test/boleto-bancario.js, commit 35229a9, whose
   *   README takes its rules from Banco do Brasil's "Especificações Técnicas para Confecção de
   *   Boleto de Cobrança", bb.com.br/docs/pub/emp/empl/dwn/Doc5175Bloqueto.pdf).
   * - Bradesco, R$ 3,700.00: linha 23793.38128 60007.827136 95000.063305 9 75520000370000 ↔ barcode
   *   23799755200003700003381260007827139500006330 (same repository, test/conversor.js).
   */
  const BB = {
    barcode: '00193373700000001000500940144816060680935031',
    linha: '00190500954014481606906809350314337370000000100',
    printed: '00190.50095 40144.816069 06809.350314 3 37370000000100',
  };
  const BRADESCO = {
    barcode: '23799755200003700003381260007827139500006330',
    linha: '23793381286000782713695000063305975520000370000',
  };

  it('reproduces the published Banco do Brasil example digit for digit', () => {
    const rebuilt = buildBarcode({ bankCode: '001', dueDate: '2007-12-31', amountCents: 100, freeField: '0500940144816060680935031' });
    expect(rebuilt).toBe(BB.barcode);
    expect(barcodeToLinhaDigitavel(BB.barcode)).toBe(BB.linha);
    expect(formatLinhaDigitavel(BB.linha)).toBe(BB.printed);
    expect(linhaDigitavelToBarcode(BB.linha)).toBe(BB.barcode);
    expect(parseBarcode(BB.barcode, '2008-01-15')).toEqual({
      bankCode: '001',
      currency: '9',
      dueDate: '2007-12-31',
      amountCents: 100,
      freeField: '0500940144816060680935031',
    });
  });

  it('converts the published Bradesco linha digitável to its barcode and back', () => {
    expect(isValidLinhaDigitavel(BRADESCO.linha)).toBe(true);
    expect(linhaDigitavelToBarcode(BRADESCO.linha)).toBe(BRADESCO.barcode);
    expect(barcodeToLinhaDigitavel(BRADESCO.barcode)).toBe(BRADESCO.linha);
    expect(parseBarcode(BRADESCO.barcode, '2018-06-01').amountCents).toBe(370_000);
  });

  it('rejects a wrong general check digit, a wrong field check digit and wrong lengths', () => {
    expect(isValidBarcode('00153373700000001000500940144816060680935031')).toBe(false);
    expect(isValidBarcode(BB.barcode.slice(1))).toBe(false);
    expect(isValidBarcode(`${BB.barcode.slice(0, 43)}x`)).toBe(false);
    // General check digit (field 4) changed from 9 to 4.
    expect(isValidLinhaDigitavel('23793381286000782713695000063305475520000370000')).toBe(false);
    // Field 2's check digit changed.
    expect(isValidLinhaDigitavel(`${BB.linha.slice(0, 20)}0${BB.linha.slice(21)}`)).toBe(false);
    expect(() => linhaDigitavelToBarcode(BB.linha.slice(0, 46))).toThrow(RangeError);
  });

  it('computes the check digits of the textbook cases', () => {
    // Módulo 11 results 0, 10 and 11 become 1.
    expect(mod11('0')).toBe(1);
    // Field 1 of the Banco do Brasil example: 00190.5009 + check digit 5.
    expect(mod10('001905009')).toBe(5);
    expect(mod10('')).toBe(0);
  });

  /**
   * FEBRABAN, "Manual Operacional do Fator de Vencimento da Cobrança Bancária" v01 (2012-06-01):
   * 1000 = 03/07/2000, 1001 = 04/07/2000, 5316 = 27/04/2012, 9998 = 20/02/2025, 9999 = 21/02/2025;
   * from 22/02/2025 the factor restarts at 1000. The 3,000-before / 5,500-after window and its
   * example (13/03/2014 is factor 6001; limits 24/12/2005, factor 3000, and 03/04/2029, factor
   * 2501) are FEBRABAN's rule as quoted in brcobranca's lib/brcobranca/calculo_data.rb (8.0.0).
   */
  it('computes the due-date factor, including the restart at 1000 on 2025-02-22', () => {
    const table: [string, number][] = [
      ['2000-07-03', 1000],
      ['2000-07-04', 1001],
      ['2012-04-27', 5316],
      ['2014-03-13', 6001],
      ['2025-02-20', 9998],
      ['2025-02-21', 9999],
      ['2025-02-22', 1000],
      ['2025-02-23', 1001],
      ['2029-04-03', 2501],
      ['2049-10-13', 9999],
      ['2049-10-14', 1000],
    ];
    for (const [date, factor] of table) expect([date, dueDateFactor(date)]).toEqual([date, factor]);
    expect(() => dueDateFactor('2000-07-02')).toThrow(RangeError);
    expect(() => dueDateFactor('2025-02-30')).toThrow(RangeError);
  });

  it('reads a factor back within FEBRABAN’s window around the reference date', () => {
    expect(dueDateFromFactor(6001, '2014-03-13')).toBe('2014-03-13');
    expect(dueDateFromFactor(3000, '2014-03-13')).toBe('2005-12-24');
    expect(dueDateFromFactor(2501, '2014-03-13')).toBe('2029-04-03');
    expect(dueDateFromFactor(1000, '2025-02-20')).toBe('2025-02-22');
    expect(dueDateFromFactor(9999, '2025-02-23')).toBe('2025-02-21');
  });

  it('validates calendar dates', () => {
    expect(isCalendarDate('2028-02-29')).toBe(true);
    for (const bad of ['2027-02-29', '2026-13-01', '2026-1-01', '20261201', '2026-12-01T00:00:00Z', '']) {
      expect([bad, isCalendarDate(bad)]).toEqual([bad, false]);
    }
    expect(addDays('2026-12-31', 1)).toBe('2027-01-01');
  });

  it('property: every generated boleto verifies, and its linha digitável converts back to its barcode', () => {
    const dates = fc.integer({ min: 0, max: 20_000 }).map((d) => addDays('2000-07-03', d));
    fc.assert(
      fc.property(
        fc.stringMatching(/^\d{25}$/),
        fc.integer({ min: 0, max: MAX_AMOUNT_CENTS }),
        dates,
        fc.stringMatching(/^\d{3}$/),
        (freeField, amountCents, dueDate, bankCode) => {
          const barcode = buildBarcode({ bankCode, dueDate, amountCents, freeField });
          expect(barcode).toMatch(/^\d{44}$/);
          expect(isValidBarcode(barcode)).toBe(true);
          const linha = barcodeToLinhaDigitavel(barcode);
          expect(linha).toMatch(/^\d{47}$/);
          expect(isValidLinhaDigitavel(linha)).toBe(true);
          expect(linhaDigitavelToBarcode(linha)).toBe(barcode);
          // Any date within the window reads back from its factor.
          const parsed = parseBarcode(barcode, addDays(dueDate, -MAX_DAYS_AHEAD));
          expect(parsed).toEqual({ bankCode, currency: '9', dueDate, amountCents, freeField });
          expect(parseBarcode(barcode, addDays(dueDate, 3000)).dueDate).toBe(dueDate);
        },
      ),
      { numRuns: 500 },
    );
  });

  it('property: changing any one digit of a linha digitável is detected', () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 46 }), fc.integer({ min: 1, max: 9 }), (position, delta) => {
        for (const linha of [BB.linha, BRADESCO.linha]) {
          const digit = (Number(linha[position]) + delta) % 10;
          const changed = linha.slice(0, position) + digit + linha.slice(position + 1);
          // A changed digit breaks its field's módulo 10 or, in fields 4 and 5, the módulo 11 (for
          // these two lines: their general digits 3 and 9 stand for one remainder each).
          expect(isValidLinhaDigitavel(changed)).toBe(false);
        }
      }),
    );
  });
});
