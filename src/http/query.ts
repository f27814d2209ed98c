import { addField, badRequest, newFieldMap, type FieldMap } from './errors.js';

/**
 * Reads a query string into typed values, collecting every problem into one field map (400 with
 * `{errors: {bad_request: {<param>: [messages]}}}`). An absent or empty parameter takes its default.
 * Unknown parameters are ignored.
 */
export class QueryReader {
  readonly fields: FieldMap = newFieldMap();
  private readonly q: Record<string, unknown>;

  constructor(raw: unknown) {
    this.q = (raw ?? {}) as Record<string, unknown>;
  }

  add(field: string, message: string): void {
    addField(this.fields, field, message);
  }

  private present(name: string): unknown {
    const v = this.q[name];
    return v === undefined || v === '' ? undefined : v;
  }

  int(name: string, min: number, max: number, fallback: number): number {
    const v = this.present(name);
    if (v === undefined) return fallback;
    if (typeof v !== 'string' || !/^\d{1,9}$/.test(v)) {
      this.add(name, 'must be an integer');
      return fallback;
    }
    const n = Number(v);
    if (n < min) this.add(name, `must be greater than or equal to ${min}`);
    if (n > max) this.add(name, `must be less than or equal to ${max}`);
    return n;
  }

  oneOf<T extends string>(name: string, values: readonly T[]): T | undefined {
    const v = this.present(name);
    if (v === undefined) return undefined;
    if (typeof v !== 'string' || !(values as readonly string[]).includes(v)) {
      this.add(name, `must be one of: ${values.join(', ')}`);
      return undefined;
    }
    return v as T;
  }

  /** A `YYYY-MM-DD` date, as 00:00:00Z of that day. */
  date(name: string): Date | undefined {
    const v = this.present(name);
    if (v === undefined) return undefined;
    const d = typeof v === 'string' && /^\d{4}-\d{2}-\d{2}$/.test(v) ? new Date(`${v}T00:00:00Z`) : null;
    if (!d || Number.isNaN(d.getTime()) || d.toISOString().slice(0, 10) !== v) {
      this.add(name, 'must be a date YYYY-MM-DD');
      return undefined;
    }
    return d;
  }

  /** A string matching `pattern`, or undefined when absent. */
  string(name: string, pattern: RegExp, message: string): string | undefined {
    const v = this.present(name);
    if (v === undefined) return undefined;
    if (typeof v !== 'string' || !pattern.test(v)) {
      this.add(name, message);
      return undefined;
    }
    return v;
  }

  /** Throws the 400 when anything was wrong. */
  done(options: { worked?: boolean } = {}): void {
    if (Object.keys(this.fields).length > 0) throw badRequest(this.fields, options);
  }
}

export const PER_PAGE_DEFAULT = 20;
export const PER_PAGE_MAX = 100;
const PAGE_MAX = 1_000_000;
const DAY_MS = 86_400_000;

export interface PageAndDates {
  page: number;
  perPage: number;
  /** Inclusive lower bound (00:00:00Z of date_from). */
  from: Date | undefined;
  /** Exclusive upper bound (00:00:00Z of the day after date_to). */
  before: Date | undefined;
}

/**
 * The list parameters the statement, the transaction list and the MED list share: page (>= 1,
 * default 1), per_page (1 to 100, default 20; above 100 is a 400, not clamped), date_from and
 * date_to (`YYYY-MM-DD`, UTC: from 00:00:00Z, through 23:59:59.999Z).
 */
export function readPageAndDates(r: QueryReader): PageAndDates {
  const page = r.int('page', 1, PAGE_MAX, 1);
  const perPage = r.int('per_page', 1, PER_PAGE_MAX, PER_PAGE_DEFAULT);
  const from = r.date('date_from');
  const to = r.date('date_to');
  if (from && to && to < from) r.add('date_to', 'must not be before date_from');
  return { page, perPage, from, before: to ? new Date(to.getTime() + DAY_MS) : undefined };
}
