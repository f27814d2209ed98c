import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { DomainError } from '../../src/errors/catalog.js';
import { domainErrorToHttp } from '../../src/http/errorMap.js';
import { cpfCheckDigits, isValidCpf } from '../../src/lib/documents.js';
import { parseCashOut } from '../../src/pix/cashOutCommand.js';
import { detectPixKeyType, normalizePixKey } from '../../src/pix/keys.js';
import { formatBrl, limitProblem, limitWindows, msSinceLocalMidnight } from '../../src/pix/limits.js';
import { parseRefund } from '../../src/pix/refundRequest.js';
import { SeededRandom } from '../../src/rail/sim/random.js';
import { REJECTION, returnProblem } from '../../src/rail/sim/returnRules.js';

const HOUR = 3_600_000;
const DAY = 24 * HOUR;
// Instants from 2019-03-01 (after Brazil's last daylight-saving change) to 2035.
const instant = fc.integer({ min: Date.UTC(2019, 2, 1), max: Date.UTC(2035, 0, 1) }).map((t) => new Date(t));

function saoPauloHour(d: Date): number {
  return Number(new Intl.DateTimeFormat('en-US', { timeZone: 'America/Sao_Paulo', hourCycle: 'h23', hour: '2-digit' }).format(d));
}

describe('cash-out limit windows (America/Sao_Paulo)', () => {
  it('the day window starts at local midnight at most 24 h before; the night window exactly when the local hour is 20-05', () => {
    fc.assert(
      fc.property(instant, (now) => {
        const windows = limitWindows(now);
        const day = windows.find((w) => w.kind === 'day')!;
        expect(day.start.getTime()).toBeLessThanOrEqual(now.getTime());
        expect(now.getTime() - day.start.getTime()).toBeLessThan(DAY);
        expect(msSinceLocalMidnight(day.start)).toBe(0);
        const hour = saoPauloHour(now);
        const night = windows.find((w) => w.kind === 'night');
        expect(night !== undefined).toBe(hour >= 20 || hour < 6);
        if (night) {
          expect(msSinceLocalMidnight(night.start)).toBe(20 * HOUR);
          expect(now.getTime() - night.start.getTime()).toBeLessThan(10 * HOUR);
          expect(night.start.getTime()).toBeLessThanOrEqual(now.getTime());
        }
      }),
    );
  });

  it('one window start for every instant inside the same window', () => {
    fc.assert(
      fc.property(instant, fc.integer({ min: 0, max: 10 * HOUR - 1 }), (now, later) => {
        const [day] = limitWindows(now);
        const other = new Date(day!.start.getTime() + (later % DAY));
        if (other.getTime() - day!.start.getTime() < DAY) expect(limitWindows(other)[0]!.start).toEqual(day!.start);
      }),
    );
  });

  it('checks per operation, then nighttime, then daily; amounts in base units, limits in cents', () => {
    const limits = { maxAmountCents: 1000, dailyLimitCents: 5000, nighttimeLimitCents: 2000 };
    const dayOnly = [{ kind: 'day' as const, start: new Date(0) }];
    const night = [...dayOnly, { kind: 'night' as const, start: new Date(0) }];
    expect(limitProblem(100_001, limits, night, new Map())?.code).toBe('amount_limit_exceeded');
    expect(limitProblem(100_000, limits, night, new Map([['night', 150_000]]))?.code).toBe('nighttime_limit_exceeded');
    expect(limitProblem(100_000, limits, dayOnly, new Map([['night', 150_000], ['day', 400_000]]))).toBeNull();
    expect(limitProblem(100_001 - 1, limits, dayOnly, new Map([['day', 400_001]]))?.code).toBe('daily_limit_exceeded');
    expect(limitProblem(1, { ...limits, nighttimeLimitCents: 0 }, night, new Map())?.detail).toContain('not permitted');
    expect(formatBrl(123_456_789)).toBe('R$ 1.234.567,89');
    expect(formatBrl(5)).toBe('R$ 0,05');
  });
});

describe('PIX keys', () => {
  const cpf = fc.integer({ min: 0, max: 999_999_999 }).map((n) => String(n).padStart(9, '0')).filter((n) => !/^(\d)\1{8}$/.test(n)).map((n) => n + cpfCheckDigits(n));

  it('11 digits are ambiguous without a type; a formatted CPF is a cpf; normalization is idempotent', () => {
    fc.assert(
      fc.property(cpf, (digits) => {
        expect(isValidCpf(digits)).toBe(true);
        expect(detectPixKeyType(digits)).toEqual({ ambiguous: true });
        const formatted = `${digits.slice(0, 3)}.${digits.slice(3, 6)}.${digits.slice(6, 9)}-${digits.slice(9)}`;
        expect(detectPixKeyType(formatted)).toEqual({ type: 'cpf' });
        expect(normalizePixKey('cpf', formatted)).toBe(digits);
        expect(normalizePixKey('cpf', normalizePixKey('cpf', formatted)!)).toBe(digits);
      }),
    );
  });

  it('phones become E.164: +55 added to area code + number, formatting removed', () => {
    fc.assert(
      // Area codes have no zero digit (11, 21, … 99); mobile numbers are 9 digits starting with 9.
      fc.property(fc.integer({ min: 1, max: 9 }).chain((a) => fc.integer({ min: 1, max: 9 }).map((b) => a * 10 + b)), fc.integer({ min: 900_000_000, max: 999_999_999 }), (ddd, n) => {
        const e164 = `+55${ddd}${n}`;
        expect(normalizePixKey('phone', `${ddd}${n}`)).toBe(e164);
        expect(normalizePixKey('phone', `(${ddd}) ${String(n).slice(0, 5)}-${String(n).slice(5)}`)).toBe(e164);
        expect(normalizePixKey('phone', `+55 ${ddd} ${n}`)).toBe(e164);
        expect(detectPixKeyType(`(${ddd}) ${n}`)).toEqual({ type: 'phone' });
      }),
    );
  });

  it('a command is the same command however its key is written (the external_id fingerprint)', () => {
    fc.assert(
      fc.property(cpf, fc.integer({ min: 1, max: 1_000_000 }), (digits, amount) => {
        const a = parseCashOut({ amount, pix_key: digits, pix_key_type: 'cpf', external_id: 'x' });
        const b = parseCashOut({ pix_key_type: 'cpf', amount, pix_key: `${digits.slice(0, 3)}.${digits.slice(3, 6)}.${digits.slice(6, 9)}-${digits.slice(9)}`, external_id: ' x ' });
        expect(b.fingerprint).toBe(a.fingerprint);
        expect(b.externalId).toBe('x');
        expect(parseCashOut({ amount: amount + 1, pix_key: digits, pix_key_type: 'cpf' }).fingerprint).not.toBe(a.fingerprint);
      }),
    );
  });
});

describe('refund request', () => {
  // POST /pix/refund answers its errors in the business shape with `worked: false`.
  const bodyOf = (err: unknown) => domainErrorToHttp(err as DomainError, 'business_worked').body;
  it('takes the first alias present and non-empty; defaults reason MD06 and description Devolução PIX', () => {
    expect(parseRefund({ end_to_end_id: 'E1', transaction_id: 'T1', original_e2e_id: '' })).toEqual({
      originalId: 'T1',
      originalIdField: 'transaction_id',
      amountCents: null,
      returnCode: 'MD06',
      description: 'Devolução PIX',
    });
    expect(parseRefund({ original_transaction_id: 'A', return_code: 'BE08', description: '  ' }).returnCode).toBe('BE08');
    expect(parseRefund({ original_transaction_id: 'A', reason: 'FR01', return_code: 'BE08' }).returnCode).toBe('FR01');
    expect(parseRefund({ original_transaction_id: 'A', description: '  ' }).description).toBe('Devolução PIX');
    try {
      parseRefund({});
      expect.unreachable();
    } catch (err) {
      expect(bodyOf(err)).toEqual({ worked: false, errors: { bad_request: 'original_transaction_id is required' } });
    }
  });
});

describe('the simulated central bank', () => {
  it('judges returns by code, deadline and what remains', () => {
    const at = new Date('2025-01-01T00:00:00Z');
    const days = (n: number) => new Date(at.getTime() + n * DAY);
    const base = { originalAt: at, amount: 100, remaining: 100 };
    expect(returnProblem({ ...base, returnCode: 'MD06', now: days(90) })).toBeNull();
    expect(returnProblem({ ...base, returnCode: 'MD06', now: days(91) })).toBe(REJECTION.deadlineExceeded);
    expect(returnProblem({ ...base, returnCode: 'FR01', now: days(80) })).toBeNull();
    expect(returnProblem({ ...base, returnCode: 'BE08', now: days(81) })).toBe(REJECTION.deadlineExceeded);
    expect(returnProblem({ ...base, returnCode: 'SL02', now: days(31) })).toBe(REJECTION.deadlineExceeded);
    expect(returnProblem({ ...base, returnCode: 'md06', now: at })).toBe(REJECTION.invalidReturnCode);
    expect(returnProblem({ ...base, returnCode: 'RR04', now: at, amount: 101 })).toBe(REJECTION.amountExceeded);
  });

  it('draws the same sequence for the same seed, valid CPFs and well-formed end-to-end ids', () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 0xffffffff }), (seed) => {
        const a = new SeededRandom(seed);
        const b = new SeededRandom(seed);
        const now = new Date('2025-06-01T12:34:00Z');
        for (let i = 0; i < 5; i++) {
          const id = a.endToEndId('D', '18236120', now);
          expect(id).toBe(b.endToEndId('D', '18236120', now));
          expect(id).toMatch(/^D18236120202506011234[A-Z0-9]{11}$/);
          const doc = a.cpf();
          expect(doc).toBe(b.cpf());
          expect(isValidCpf(doc)).toBe(true);
        }
      }),
      { numRuns: 50 },
    );
  });
});
