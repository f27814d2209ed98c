import { addDays, businessDaysBetween, daysBetween, onOrNextBusinessDay } from '../../lib/businessDays.js';

/**
 * What a due-date charge (cobv) asks on a given payment date, in integer cents.
 *
 * The standard's `valor` of a cobv: `original`, and optionally `abatimento` (rebate), `desconto`
 * (discount for paying early), `multa` (fine for paying late) and `juros` (interest for paying
 * late), each with a `modalidade` and a `valorPerc` that is a value (cents) or a percentage (in
 * hundredths of a percent: "2.50" is 2.5 %) depending on the modality. pixgate's reading:
 *
 *  - Dates. The due date moves to the next business day when it falls on a weekend or national
 *    holiday (`adjustedDue`); paying up to that day is paying on time. The charge can be paid up to
 *    `adjustedDue + validadeAposVencimento` calendar days, moved on to the next business day again
 *    when that falls on a non-business day (`lastPayable`; the standard's examples A–G).
 *  - Base. Percentages of rebate apply to `original`; every other percentage applies to
 *    `base = original − rebate`, the debt actually owed.
 *  - Rebate (always): 1 value, 2 percentage.
 *  - Discount (only when paid on time, payDate ≤ adjustedDue): 1 value / 2 percentage up to fixed
 *    dates (up to three; each date moved to its next business day like the due date; the earliest
 *    date not yet passed applies); 3 value / 5 percentage per calendar day of anticipation, 4 value
 *    / 6 percentage per business day of anticipation (days from the payment date to adjustedDue).
 *    A discount never takes the amount below 1 cent.
 *  - Fine (only when late, payDate > adjustedDue): 1 value, 2 percentage; once.
 *  - Interest (only when late): counted from the original due date (calendar days for modalities
 *    1–4, business days for 5–8): 1/5 value per day, 2/6 percentage per day, 3/7 percentage per
 *    month, 4/8 percentage per year. A month is 30 calendar days or 21 business days, a year 360
 *    calendar days or 252 business days (the commercial and the Brazilian market conventions).
 *  - Rounding. Each component is computed exactly (integer arithmetic on bigint) and rounded to
 *    the cent once, half up; final = original − rebate − discount + fine + interest, never above
 *    9999999999.99 (interest is cut there).
 */
/** The largest amount the standard's decimal form writes (9999999999.99): the final amount never passes it. */
export const MAX_FINAL_CENTS = 999_999_999_999;

export interface FixedDateDiscount {
  date: string;
  /** Cents (modality 1) or hundredths of a percent (2). */
  value: number;
}

export interface CobvValue {
  originalCents: number;
  abatimento?: { modalidade: 1 | 2; value: number };
  desconto?: { modalidade: 1 | 2; dates: FixedDateDiscount[] } | { modalidade: 3 | 4 | 5 | 6; value: number };
  multa?: { modalidade: 1 | 2; value: number };
  juros?: { modalidade: 1 | 2 | 3 | 4 | 5 | 6 | 7 | 8; value: number };
}

export interface CobvCalendar {
  dueDate: string;
  daysAfterDue: number;
}

/** What a due-date charge stores (pix_charges.due_terms): its value and its calendar. */
export interface DueTerms {
  value: CobvValue;
  calendar: CobvCalendar;
}

export interface AmountDue {
  payable: boolean;
  adjustedDue: string;
  lastPayable: string;
  originalCents: number;
  abatimentoCents: number;
  descontoCents: number;
  multaCents: number;
  jurosCents: number;
  finalCents: number;
}

/** The last day a cobv can be paid (see the file's comment). */
export function payableWindow(calendar: CobvCalendar): { adjustedDue: string; lastPayable: string } {
  const adjustedDue = onOrNextBusinessDay(calendar.dueDate);
  return { adjustedDue, lastPayable: onOrNextBusinessDay(addDays(adjustedDue, calendar.daysAfterDue)) };
}

/** round(numerator / denominator), half up, for non-negative operands. */
function roundHalfUp(numerator: bigint, denominator: bigint): number {
  return Number((2n * numerator + denominator) / (2n * denominator));
}

/** `base` × `hundredthsOfPercent` / 10 000 × `days` / `per`, rounded once. */
function percentOf(base: number, hundredthsOfPercent: number, days = 1, per = 1): number {
  return roundHalfUp(BigInt(base) * BigInt(hundredthsOfPercent) * BigInt(days), 10_000n * BigInt(per));
}

export function amountDue(value: CobvValue, calendar: CobvCalendar, payDate: string): AmountDue {
  const { adjustedDue, lastPayable } = payableWindow(calendar);
  const original = value.originalCents;
  const a = value.abatimento;
  const abatimento = Math.min(a ? (a.modalidade === 1 ? a.value : percentOf(original, a.value)) : 0, original - 1);
  const base = original - abatimento;
  let desconto = 0;
  let multa = 0;
  let juros = 0;
  if (payDate <= adjustedDue) {
    desconto = Math.min(discount(value.desconto, base, payDate, adjustedDue), base - 1);
  } else {
    const m = value.multa;
    if (m) multa = m.modalidade === 1 ? m.value : percentOf(base, m.value);
    const j = value.juros;
    if (j) {
      const business = j.modalidade >= 5;
      const days = business ? businessDaysBetween(calendar.dueDate, payDate) : Math.max(0, daysBetween(calendar.dueDate, payDate));
      const kind = (j.modalidade - 1) % 4; // 0 value/day, 1 %/day, 2 %/month, 3 %/year
      if (kind === 0) juros = j.value * days;
      else juros = percentOf(base, j.value, days, kind === 1 ? 1 : kind === 2 ? (business ? 21 : 30) : business ? 252 : 360);
    }
    juros = Math.max(0, Math.min(juros, MAX_FINAL_CENTS - base - multa));
  }
  return {
    payable: payDate <= lastPayable,
    adjustedDue,
    lastPayable,
    originalCents: original,
    abatimentoCents: abatimento,
    descontoCents: desconto,
    multaCents: multa,
    jurosCents: juros,
    finalCents: base - desconto + multa + juros,
  };
}

function discount(d: CobvValue['desconto'], base: number, payDate: string, adjustedDue: string): number {
  if (!d) return 0;
  if ('dates' in d) {
    const open = d.dates.filter((x) => payDate <= onOrNextBusinessDay(x.date)).sort((x, y) => (x.date < y.date ? -1 : 1));
    const applies = open[0];
    if (!applies) return 0;
    return d.modalidade === 1 ? applies.value : percentOf(base, applies.value);
  }
  const business = d.modalidade === 4 || d.modalidade === 6;
  const days = business ? businessDaysBetween(payDate, adjustedDue) : Math.max(0, daysBetween(payDate, adjustedDue));
  return d.modalidade === 3 || d.modalidade === 4 ? d.value * days : percentOf(base, d.value, days);
}
