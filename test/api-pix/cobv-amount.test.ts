import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { amountDue, payableWindow, type CobvValue } from '../../src/apiPix/cobv/amountDue.js';
import { addDays, businessDaysBetween, easter, isBusinessDay, onOrNextBusinessDay } from '../../src/lib/businessDays.js';

describe('business days (lib/businessDays.ts)', () => {
  it('Easter and the holidays that hang on it', () => {
    expect(easter(2024)).toBe('2024-03-31');
    expect(easter(2026)).toBe('2026-04-05');
    expect(easter(2027)).toBe('2027-03-28');
    // 2026: Carnival 16–17 Feb, Good Friday 3 Apr, Corpus Christi 4 Jun.
    for (const d of ['2026-02-16', '2026-02-17', '2026-04-03', '2026-06-04', '2026-01-01', '2026-04-21', '2026-05-01', '2026-09-07', '2026-10-12', '2026-11-02', '2026-11-20', '2026-12-25']) {
      expect([d, isBusinessDay(d)]).toEqual([d, false]);
    }
    expect(isBusinessDay('2026-11-27')).toBe(true); // a Friday
    expect(isBusinessDay('2026-11-28')).toBe(false); // Saturday
    expect(onOrNextBusinessDay('2026-11-14')).toBe('2026-11-16'); // Sat 14; Sun 15 (holiday) → Mon 16
    expect(businessDaysBetween('2026-11-27', '2026-12-02')).toBe(3); // Mon 30, Tue 1, Wed 2
  });
});

describe('cobv: the payable window (the standard examples A–G of validadeAposVencimento)', () => {
  const cases: [string, string, number, string][] = [
    ['A', '2020-10-20', 4, '2020-10-26'],
    ['B', '2020-12-25', 0, '2020-12-28'],
    ['C', '2020-12-25', 1, '2020-12-29'],
    ['D', '2020-12-25', 3, '2020-12-31'],
    ['E', '2020-12-25', 4, '2021-01-04'],
    ['F', '2021-08-27', 5, '2021-09-01'],
    ['G', '2021-08-28', 5, '2021-09-06'],
  ];
  it.each(cases)('example %s: due %s, %i days after → last payable %s', (_, dueDate, daysAfterDue, last) => {
    expect(payableWindow({ dueDate, daysAfterDue }).lastPayable).toBe(last);
    const v: CobvValue = { originalCents: 1000 };
    expect(amountDue(v, { dueDate, daysAfterDue }, last).payable).toBe(true);
    expect(amountDue(v, { dueDate, daysAfterDue }, addDays(last, 1)).payable).toBe(false);
  });
});

describe('cobv: the amount due on a payment date (integer cents)', () => {
  // Wednesday 2 Dec 2026, a business day.
  const cal = { dueDate: '2026-12-02', daysAfterDue: 60 };

  it('late: rebate, fine as a percentage, interest per month in calendar days, each rounded half up once', () => {
    const v: CobvValue = { originalCents: 10_000, abatimento: { modalidade: 1, value: 500 }, multa: { modalidade: 2, value: 200 }, juros: { modalidade: 3, value: 100 } };
    // Base 9500; fine 2 % = 190; interest 1 %/month × 10 days / 30 = 31.67 → 32.
    expect(amountDue(v, cal, '2026-12-12')).toMatchObject({ abatimentoCents: 500, descontoCents: 0, multaCents: 190, jurosCents: 32, finalCents: 9722, payable: true });
    // On the due date: no fine, no interest; the rebate always applies.
    expect(amountDue(v, cal, '2026-12-02')).toMatchObject({ multaCents: 0, jurosCents: 0, finalCents: 9500 });
  });

  it('interest in business days does not grow over a weekend; per year uses 252 business days', () => {
    const v: CobvValue = { originalCents: 1_000_000, juros: { modalidade: 8, value: 2520 } }; // 25.2 %/year → 0.1 %/business day
    expect(amountDue(v, { dueDate: '2026-11-27', daysAfterDue: 30 }, '2026-11-30').jurosCents).toBe(1000); // Sat, Sun not counted
    expect(amountDue(v, { dueDate: '2026-11-27', daysAfterDue: 30 }, '2026-12-01').jurosCents).toBe(2000);
    const perDay: CobvValue = { originalCents: 1_000_000, juros: { modalidade: 1, value: 150 } }; // R$ 1.50 per calendar day
    expect(amountDue(perDay, { dueDate: '2026-11-27', daysAfterDue: 30 }, '2026-11-30').jurosCents).toBe(450);
  });

  it('a due date on a weekend: paying on the next business day is on time; interest then counts from the due date itself', () => {
    const v: CobvValue = { originalCents: 10_000, multa: { modalidade: 1, value: 300 }, juros: { modalidade: 1, value: 10 } };
    const sat = { dueDate: '2026-11-28', daysAfterDue: 10 };
    expect(amountDue(v, sat, '2026-11-30')).toMatchObject({ adjustedDue: '2026-11-30', multaCents: 0, jurosCents: 0, finalCents: 10_000 });
    expect(amountDue(v, sat, '2026-12-01')).toMatchObject({ multaCents: 300, jurosCents: 30, finalCents: 10_330 });
  });

  it('discounts: fixed dates (the earliest not yet passed), per calendar and business day of anticipation, never to zero', () => {
    const fixed: CobvValue = { originalCents: 10_000, desconto: { modalidade: 1, dates: [{ date: '2026-11-20', value: 1000 }, { date: '2026-11-25', value: 500 }] } };
    expect(amountDue(fixed, cal, '2026-11-19').descontoCents).toBe(1000);
    expect(amountDue(fixed, cal, '2026-11-23').descontoCents).toBe(1000); // 20 Nov (Fri) is a holiday: that date moves to Mon 23
    expect(amountDue(fixed, cal, '2026-11-24').descontoCents).toBe(500);
    expect(amountDue(fixed, cal, '2026-11-26').descontoCents).toBe(0);
    const pct: CobvValue = { originalCents: 10_000, desconto: { modalidade: 2, dates: [{ date: '2026-11-25', value: 250 }] } };
    expect(amountDue(pct, cal, '2026-11-25').finalCents).toBe(9750);
    const perDay: CobvValue = { originalCents: 10_000, desconto: { modalidade: 5, value: 10 } }; // 0.10 % per calendar day
    expect(amountDue(perDay, cal, '2026-11-27').descontoCents).toBe(50); // 5 days early
    const perBusinessDay: CobvValue = { originalCents: 10_000, desconto: { modalidade: 4, value: 100 } };
    expect(amountDue(perBusinessDay, cal, '2026-11-27').descontoCents).toBe(300); // Mon 30, Tue 1, Wed 2
    const huge: CobvValue = { originalCents: 1000, desconto: { modalidade: 3, value: 999 } };
    expect(amountDue(huge, cal, '2026-11-01').finalCents).toBe(1);
  });

  it('half up: exactly half a cent goes up, below half goes down', () => {
    expect(amountDue({ originalCents: 50, multa: { modalidade: 2, value: 100 } }, cal, '2026-12-03').multaCents).toBe(1); // 0.5 → 1
    expect(amountDue({ originalCents: 49, multa: { modalidade: 2, value: 100 } }, cal, '2026-12-03').multaCents).toBe(0); // 0.49 → 0
  });

  const value = fc.record({
    originalCents: fc.integer({ min: 1, max: 99_999_999_99 }),
    multa: fc.option(fc.record({ modalidade: fc.constantFrom(1 as const, 2 as const), value: fc.integer({ min: 0, max: 10_000 }) }), { nil: undefined }),
    juros: fc.option(fc.record({ modalidade: fc.constantFrom(1 as const, 2 as const, 3 as const, 4 as const, 5 as const, 6 as const, 7 as const, 8 as const), value: fc.integer({ min: 0, max: 10_000 }) }), { nil: undefined }),
    desconto: fc.option(fc.record({ modalidade: fc.constantFrom(3 as const, 4 as const, 5 as const, 6 as const), value: fc.integer({ min: 0, max: 10_000 }) }), { nil: undefined }),
  });
  const day = fc.integer({ min: -90, max: 90 }).map((n) => addDays('2026-12-02', n));

  it('property: on time never more than the base, late never less; at least 1 cent; the parts add up', () => {
    fc.assert(
      fc.property(value, day, (v, payDate) => {
        const r = amountDue(v, cal, payDate);
        expect(r.finalCents).toBe(r.originalCents - r.abatimentoCents - r.descontoCents + r.multaCents + r.jurosCents);
        expect(r.finalCents).toBeGreaterThanOrEqual(1);
        expect(Number.isSafeInteger(r.finalCents)).toBe(true);
        if (payDate <= r.adjustedDue) expect(r.finalCents).toBeLessThanOrEqual(v.originalCents);
        else expect(r.finalCents).toBeGreaterThanOrEqual(v.originalCents);
      }),
    );
  });

  it('property: paying later never costs less once late; never more while early (anticipation discounts shrink)', () => {
    fc.assert(
      fc.property(value, day, day, (v, d1, d2) => {
        const [early, later] = d1 <= d2 ? [d1, d2] : [d2, d1];
        const a = amountDue(v, cal, early);
        const b = amountDue(v, cal, later);
        if (early > a.adjustedDue) expect(b.finalCents).toBeGreaterThanOrEqual(a.finalCents);
        if (later <= a.adjustedDue) expect(b.finalCents).toBeGreaterThanOrEqual(a.finalCents);
      }),
    );
  });
});
