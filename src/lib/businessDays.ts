/**
 * Calendar dates (`YYYY-MM-DD`) and Brazil's national business days, for rules that count days the
 * way banks do (due-date charges: a due date on a weekend or holiday moves to the next business day).
 *
 * A business day is a weekday that is not a national bank holiday: 1 Jan, Carnival Monday and
 * Tuesday, Good Friday, 21 Apr, 1 May, Corpus Christi, 7 Sep, 12 Oct, 2 Nov, 15 Nov, 20 Nov (national
 * since 2024), 25 Dec. Carnival and Corpus Christi are bank holidays in the interbank calendar, so
 * they count as holidays here. Local (state and city) holidays are not known: the payer's city is not.
 */

const DAY_MS = 86_400_000;

/** Days since 1970-01-01 of a `YYYY-MM-DD` date. */
export function dayNumber(date: string): number {
  return Date.parse(`${date}T00:00:00Z`) / DAY_MS;
}

/** `YYYY-MM-DD` of a day number. */
export function dateOfDay(day: number): string {
  return new Date(day * DAY_MS).toISOString().slice(0, 10);
}

export function addDays(date: string, days: number): string {
  return dateOfDay(dayNumber(date) + days);
}

/** Calendar days from `from` to `to` (negative when `to` is earlier). */
export function daysBetween(from: string, to: string): number {
  return dayNumber(to) - dayNumber(from);
}

/** A real calendar date written `YYYY-MM-DD`. */
export function isCalendarDate(text: string): boolean {
  if (!/^\d{4}-\d{2}-\d{2}$/.test(text)) return false;
  const ms = Date.parse(`${text}T00:00:00Z`);
  return !Number.isNaN(ms) && new Date(ms).toISOString().slice(0, 10) === text;
}

/** Easter Sunday of a Gregorian year (the anonymous Gregorian algorithm). */
export function easter(year: number): string {
  const a = year % 19;
  const b = Math.floor(year / 100);
  const c = year % 100;
  const d = Math.floor(b / 4);
  const e = b % 4;
  const f = Math.floor((b + 8) / 25);
  const g = Math.floor((b - f + 1) / 3);
  const h = (19 * a + b - d - g + 15) % 30;
  const i = Math.floor(c / 4);
  const k = c % 4;
  const l = (32 + 2 * e + 2 * i - h - k) % 7;
  const m = Math.floor((a + 11 * h + 22 * l) / 451);
  const month = Math.floor((h + l - 7 * m + 114) / 31);
  const day = ((h + l - 7 * m + 114) % 31) + 1;
  return `${year}-${String(month).padStart(2, '0')}-${String(day).padStart(2, '0')}`;
}

const holidayCache = new Map<number, Set<string>>();

/** The national bank holidays of a year. */
export function nationalHolidays(year: number): Set<string> {
  let set = holidayCache.get(year);
  if (set) return set;
  const fixed = ['01-01', '04-21', '05-01', '09-07', '10-12', '11-02', '11-15', '12-25', ...(year >= 2024 ? ['11-20'] : [])];
  const e = easter(year);
  set = new Set([...fixed.map((md) => `${year}-${md}`), addDays(e, -48), addDays(e, -47), addDays(e, -2), addDays(e, 60)]);
  if (holidayCache.size > 200) holidayCache.clear();
  holidayCache.set(year, set);
  return set;
}

export function isBusinessDay(date: string): boolean {
  const weekday = new Date(`${date}T00:00:00Z`).getUTCDay();
  if (weekday === 0 || weekday === 6) return false;
  return !nationalHolidays(Number(date.slice(0, 4))).has(date);
}

/** `date` itself when it is a business day, else the first business day after it. */
export function onOrNextBusinessDay(date: string): string {
  let d = date;
  for (let i = 0; i < 30 && !isBusinessDay(d); i++) d = addDays(d, 1);
  return d;
}

/** Business days in (from, to]: 0 when `to` is not after `from`. */
export function businessDaysBetween(from: string, to: string): number {
  let count = 0;
  for (let day = dayNumber(from) + 1; day <= dayNumber(to); day++) if (isBusinessDay(dateOfDay(day))) count++;
  return count;
}

/** Brasília has kept UTC−3 all year since 2019. */
const BRASILIA_OFFSET_MS = -3 * 3_600_000;

/** Today's date in Brasília (the calendar due dates are written in). */
export function brasiliaDate(now: Date): string {
  return new Date(now.getTime() + BRASILIA_OFFSET_MS).toISOString().slice(0, 10);
}
