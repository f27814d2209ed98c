import { centsToBaseUnits } from '../lib/money.js';
import type { UsageWindow } from './repository.js';

/**
 * Cash-out limits of an account (columns of `accounts`, set through PATCH /api/admin/accounts/:id):
 *   per operation  the largest single cash-out
 *   daily          the sum of cash-outs in one calendar day of America/Sao_Paulo
 *   nighttime      the sum of cash-outs in one night, 20:00-06:00 America/Sao_Paulo; 0 means no
 *                  cash-out at night ("outside permitted hours")
 * A cash-out counts in its windows from acceptance; a rejection or failure gives it back.
 */
export const LIMIT_TIME_ZONE = 'America/Sao_Paulo';
export const NIGHT_STARTS_HOUR = 20;
export const NIGHT_ENDS_HOUR = 6;

export interface CashOutLimits {
  maxAmountCents: number;
  dailyLimitCents: number;
  nighttimeLimitCents: number;
}

const formatter = new Intl.DateTimeFormat('en-US', {
  timeZone: LIMIT_TIME_ZONE,
  hourCycle: 'h23',
  hour: '2-digit',
  minute: '2-digit',
  second: '2-digit',
});

/** Milliseconds since local midnight in America/Sao_Paulo. */
export function msSinceLocalMidnight(now: Date): number {
  const parts = Object.fromEntries(formatter.formatToParts(now).map((p) => [p.type, p.value]));
  const seconds = Number(parts.hour) * 3600 + Number(parts.minute) * 60 + Number(parts.second);
  return seconds * 1000 + now.getUTCMilliseconds();
}

/**
 * The limit windows `now` falls in: always its day (from local midnight), and its night (from
 * 20:00 local, the evening before when `now` is before 06:00) between 20:00 and 06:00. Window
 * starts are instants; America/Sao_Paulo has had no daylight-saving change since 2019, so a fixed
 * offset inside one window is exact.
 */
export function limitWindows(now: Date): UsageWindow[] {
  const sinceMidnight = msSinceLocalMidnight(now);
  const t = now.getTime();
  const windows: UsageWindow[] = [{ kind: 'day', start: new Date(t - sinceMidnight) }];
  const hour = Math.floor(sinceMidnight / 3_600_000);
  if (hour >= NIGHT_STARTS_HOUR) windows.push({ kind: 'night', start: new Date(t - (sinceMidnight - NIGHT_STARTS_HOUR * 3_600_000)) });
  else if (hour < NIGHT_ENDS_HOUR) windows.push({ kind: 'night', start: new Date(t - (sinceMidnight + (24 - NIGHT_STARTS_HOUR) * 3_600_000)) });
  return windows;
}

export type LimitProblem = { code: 'amount_limit_exceeded' | 'daily_limit_exceeded' | 'nighttime_limit_exceeded'; detail: string };

/**
 * Which limit a cash-out of `amount` base units would break, given what the account already sent
 * in its windows (`used`, base units by window kind), or null. Checked in the order per operation,
 * nighttime, daily.
 */
export function limitProblem(amount: number, limits: CashOutLimits, windows: readonly UsageWindow[], used: ReadonlyMap<string, number>): LimitProblem | null {
  const max = centsToBaseUnits(limits.maxAmountCents);
  if (amount > max) {
    return { code: 'amount_limit_exceeded', detail: `The maximum amount per cash-out is ${formatBrl(limits.maxAmountCents)}` };
  }
  if (windows.some((w) => w.kind === 'night')) {
    const night = centsToBaseUnits(limits.nighttimeLimitCents);
    if (night === 0) {
      return { code: 'nighttime_limit_exceeded', detail: 'Cash-outs are not permitted between 20:00 and 06:00 (America/Sao_Paulo) on this account' };
    }
    const left = Math.max(0, night - (used.get('night') ?? 0));
    if (amount > left) {
      return {
        code: 'nighttime_limit_exceeded',
        detail: `Cash-outs between 20:00 and 06:00 (America/Sao_Paulo) are limited to ${formatBrl(limits.nighttimeLimitCents)} per night; ${formatBrl(left / 100)} remain`,
      };
    }
  }
  const daily = centsToBaseUnits(limits.dailyLimitCents);
  const left = Math.max(0, daily - (used.get('day') ?? 0));
  if (amount > left) {
    return {
      code: 'daily_limit_exceeded',
      detail: `Cash-outs are limited to ${formatBrl(limits.dailyLimitCents)} per day (America/Sao_Paulo); ${formatBrl(left / 100)} remain`,
    };
  }
  return null;
}

/** `R$ 1.234,56` from integer cents. */
export function formatBrl(cents: number): string {
  const whole = Math.trunc(cents / 100);
  const frac = String(Math.abs(cents % 100)).padStart(2, '0');
  return `R$ ${String(whole).replace(/\B(?=(\d{3})+(?!\d))/g, '.')},${frac}`;
}
