/**
 * The portal's languages (docs/portal.md, "Languages"): Brazilian Portuguese and English, chosen per
 * browser — the `pixgate_lang` cookie set by the switch in the header, else the first of the
 * browser's `Accept-Language` ranges that names Portuguese or English, else pt-BR — and the
 * formatting of money and dates for that language in the merchant's time zone.
 *
 * Messages live in small typed dictionaries (`dictionary(en, ptBR)`): the English one declares the
 * keys and the argument types of the messages that take arguments; the Portuguese one must have
 * exactly the same keys and signatures, so a missing or misspelled translation does not compile.
 * A page keeps its dictionary in its own file; the words every page shares are in messages.ts.
 */

export const LOCALES = ['pt-BR', 'en'] as const;
export type Locale = (typeof LOCALES)[number];
export const DEFAULT_LOCALE: Locale = 'pt-BR';

/** The cookie of the language switch (a preference, not a secret). */
export const LOCALE_COOKIE = 'pixgate_lang';
/** The cookie of the time-zone preference (an IANA zone name). */
export const TIME_ZONE_COOKIE = 'pixgate_tz';
export const DEFAULT_TIME_ZONE = 'America/Sao_Paulo';

/** A message: a text, or a function of its arguments giving the text. */
type Message = string | ((...args: never[]) => string);
/** A dictionary's type as its translations must match it: texts are any string, functions keep their parameters. */
export type Messages<T> = { readonly [K in keyof T]: T[K] extends (...args: infer A) => string ? (...args: A) => string : string };

/** A language and time zone for one request, with the formatters that follow them. */
export interface PortalLocale {
  readonly locale: Locale;
  readonly timeZone: string;
}

/**
 * A typed dictionary: `const M = dictionary({ title: 'Balance' }, { title: 'Saldo' })`, then
 * `M(req.i18n).title`. Both languages must hold the same keys with the same signatures.
 */
export function dictionary<T extends Record<string, Message>>(en: T, ptBR: Messages<T>): (where: PortalLocale | Locale) => Messages<T> {
  const byLocale: Record<Locale, Messages<T>> = { en: en as unknown as Messages<T>, 'pt-BR': ptBR };
  return (where) => byLocale[typeof where === 'string' ? where : where.locale];
}

export function isLocale(value: unknown): value is Locale {
  return typeof value === 'string' && (LOCALES as readonly string[]).includes(value);
}

/**
 * The language an `Accept-Language` header asks for: its ranges by quality (ties keep their order),
 * the first naming Portuguese (`pt`, `pt-BR`, `pt-PT`…) or English; none → pt-BR.
 */
export function negotiateLocale(acceptLanguage: string | undefined): Locale {
  if (!acceptLanguage) return DEFAULT_LOCALE;
  const ranges = acceptLanguage
    .slice(0, 512)
    .split(',')
    .map((part, order) => {
      const [tag = '', ...params] = part.trim().split(';');
      const q = params.map((p) => /^\s*q=([0-9.]+)\s*$/i.exec(p)?.[1]).find((v) => v !== undefined);
      return { tag: tag.trim().toLowerCase(), q: q === undefined ? 1 : Number(q), order };
    })
    .filter((r) => r.tag && Number.isFinite(r.q) && r.q > 0)
    .sort((a, b) => b.q - a.q || a.order - b.order);
  for (const { tag } of ranges) {
    if (tag === 'pt' || tag.startsWith('pt-')) return 'pt-BR';
    if (tag === 'en' || tag.startsWith('en-')) return 'en';
  }
  return DEFAULT_LOCALE;
}

const ZONES = new Set(Intl.supportedValuesOf('timeZone'));

export function isTimeZone(value: unknown): value is string {
  return typeof value === 'string' && value.length <= 64 && (ZONES.has(value) || value === 'UTC');
}

/** The locale of a request: the cookies when they hold a valid choice, else the header and the default zone. */
export function localeOf(cookies: { lang?: string; tz?: string }, acceptLanguage: string | undefined): PortalLocale {
  return {
    locale: isLocale(cookies.lang) ? cookies.lang : negotiateLocale(acceptLanguage),
    timeZone: isTimeZone(cookies.tz) ? cookies.tz : DEFAULT_TIME_ZONE,
  };
}

const THOUSANDS = /\B(?=(\d{3})+(?!\d))/g;

/**
 * An amount in base units (cents × 100, the merchant API's unit) as `R$ 1.234,56` — the Brazilian
 * format in both languages (it is the currency's own), rounded toward zero to the cent, negative
 * as `−R$ 1,00`. Integer arithmetic only: a fractional number is refused, never rounded.
 */
export function formatBrl(baseUnits: number | bigint | string): string {
  const units = BigInt(baseUnits); // RangeError/SyntaxError for a fraction: amounts are integers
  return formatCents(units / 100n);
}

/** Integer cents as `R$ 1.234,56`. */
export function formatCents(cents: number | bigint | string): string {
  const c = BigInt(cents);
  const abs = c < 0n ? -c : c;
  const whole = (abs / 100n).toString().replace(THOUSANDS, '.');
  const frac = (abs % 100n).toString().padStart(2, '0');
  return `${c < 0n ? '−' : ''}R$ ${whole},${frac}`;
}

type DateInput = string | Date | null | undefined;

function toDate(value: DateInput): Date | null {
  if (value === null || value === undefined || value === '') return null;
  const d = value instanceof Date ? value : new Date(value);
  return Number.isNaN(d.getTime()) ? null : d;
}

const formatters = new Map<string, Intl.DateTimeFormat>();
function formatter(locale: Locale, timeZone: string, withTime: boolean, withZone: boolean, withSeconds = false): Intl.DateTimeFormat {
  const id = `${locale}|${timeZone}|${withTime}|${withZone}|${withSeconds}`;
  let f = formatters.get(id);
  if (!f) {
    f = new Intl.DateTimeFormat(locale === 'en' ? 'en-US' : 'pt-BR', {
      timeZone,
      year: 'numeric',
      month: locale === 'en' ? 'short' : '2-digit',
      day: '2-digit',
      ...(withTime ? { hour: '2-digit', minute: '2-digit', hourCycle: 'h23' as const } : {}),
      ...(withSeconds ? { second: '2-digit' } : {}),
      ...(withZone ? { timeZoneName: 'short' as const } : {}),
    });
    formatters.set(id, f);
  }
  return f;
}

function render(d: Date, where: PortalLocale, withTime: boolean, withZone: boolean, withSeconds = false): string {
  const parts = Object.fromEntries(formatter(where.locale, where.timeZone, withTime, withZone, withSeconds).formatToParts(d).map((p) => [p.type, p.value]));
  const date = where.locale === 'en' ? `${parts.month} ${parts.day}, ${parts.year}` : `${parts.day}/${parts.month}/${parts.year}`;
  const time = withTime ? ` ${parts.hour}:${parts.minute}${withSeconds ? `:${parts.second}` : ''}` : '';
  const zone = withZone && parts.timeZoneName ? ` ${parts.timeZoneName}` : '';
  return `${date}${time}${zone}`;
}

/** A moment as a date and time in the locale's zone: `27/11/2026 14:05` (pt-BR), `Nov 27, 2026 14:05` (en). */
export function formatDateTime(value: DateInput, where: PortalLocale): string {
  const d = toDate(value);
  return d ? render(d, where, true, false) : '';
}

/** With seconds (a timeline): `27/11/2026 14:05:09`. */
export function formatDateTimeSeconds(value: DateInput, where: PortalLocale): string {
  const d = toDate(value);
  return d ? render(d, where, true, false, true) : '';
}

/** The same with the zone's short name, for what is read away from the page (a receipt): `27/11/2026 14:05 BRT`. */
export function formatDateTimeZone(value: DateInput, where: PortalLocale): string {
  const d = toDate(value);
  return d ? render(d, where, true, true) : '';
}

/** A moment's calendar date in the locale's zone: `27/11/2026`, `Nov 27, 2026`. */
export function formatDate(value: DateInput, where: PortalLocale): string {
  const d = toDate(value);
  return d ? render(d, where, false, false) : '';
}

/** The formatters of one request, bound to its language and zone: `const f = formatsOf(req.i18n)`. */
export interface Formats {
  /** Base units as `R$ 1.234,56`; empty for null/undefined. */
  brl(baseUnits: number | bigint | null | undefined): string;
  dateTime(value: DateInput): string;
  dateTimeSeconds(value: DateInput): string;
  dateTimeZone(value: DateInput): string;
  date(value: DateInput): string;
}

export function formatsOf(where: PortalLocale): Formats {
  return {
    brl: (v) => (v === null || v === undefined ? '' : formatBrl(v)),
    dateTime: (v) => formatDateTime(v, where),
    dateTimeSeconds: (v) => formatDateTimeSeconds(v, where),
    dateTimeZone: (v) => formatDateTimeZone(v, where),
    date: (v) => formatDate(v, where),
  };
}

/** The zone's offset from UTC at `at`, in ms (positive east of Greenwich). */
function zoneOffsetMs(at: number, timeZone: string): number {
  const p = Object.fromEntries(
    new Intl.DateTimeFormat('en-US', { timeZone, hourCycle: 'h23', year: 'numeric', month: '2-digit', day: '2-digit', hour: '2-digit', minute: '2-digit', second: '2-digit' })
      .formatToParts(new Date(at))
      .map((x) => [x.type, Number(x.value)]),
  );
  return Date.UTC(p.year!, p.month! - 1, p.day!, p.hour!, p.minute!, p.second!) - Math.floor(at / 1000) * 1000;
}

/**
 * A wall-clock time typed in a form (`2026-11-27T14:05`, an `<input type="datetime-local">`, or a
 * date `2026-11-27` meaning its midnight) in `timeZone`, as a moment; null when it is not one.
 */
export function parseZonedDateTime(text: string | undefined, timeZone: string): Date | null {
  const m = /^(\d{4})-(\d{2})-(\d{2})(?:[T ](\d{2}):(\d{2}))?$/.exec((text ?? '').trim());
  if (!m) return null;
  const [y, mo, d, h = 0, mi = 0] = m.slice(1).map((v) => (v === undefined ? 0 : Number(v)));
  const wall = Date.UTC(y!, mo! - 1, d!, h, mi);
  const check = new Date(wall);
  if (check.getUTCFullYear() !== y || check.getUTCMonth() !== mo! - 1 || check.getUTCDate() !== d || h > 23 || mi > 59) return null;
  // The moment whose wall clock in the zone reads `wall`: two steps settle a change of offset.
  let at = wall - zoneOffsetMs(wall, timeZone);
  at = wall - zoneOffsetMs(at, timeZone);
  return new Date(at);
}

/** A moment as the value of an `<input type="datetime-local">` in the zone: `2026-11-27T14:05`. */
export function toZonedInput(value: Date, timeZone: string): string {
  const local = new Date(value.getTime() + zoneOffsetMs(value.getTime(), timeZone));
  return local.toISOString().slice(0, 16);
}
