import type { LoggerOptions } from 'pino';

/**
 * Structured JSON logs. Credentials never reach them: the headers that carry secrets and the body
 * fields that may hold one are redacted wherever they appear.
 */
export const REDACT_PATHS = [
  'req.headers.authorization',
  'req.headers.hmac',
  'req.headers["x-api-key"]',
  'req.headers.cookie',
  'headers.authorization',
  'headers.hmac',
  'headers["x-api-key"]',
  '*.client_secret',
  '*.secret',
  '*.api_key',
  'client_secret',
  'secret',
  'api_key',
];

export function loggerOptions(level: string): LoggerOptions {
  return {
    level,
    base: { service: 'pixgate', pid: process.pid },
    timestamp: () => `,"time":"${new Date().toISOString()}"`,
    redact: { paths: REDACT_PATHS, censor: '[REDACTED]' },
  };
}

const LEVELS: Record<number, string> = { 10: 'TRACE', 20: 'DEBUG', 30: 'INFO ', 40: 'WARN ', 50: 'ERROR', 60: 'FATAL' };
const COLOURS: Record<number, number> = { 10: 90, 20: 90, 30: 32, 40: 33, 50: 31, 60: 31 };
const QUIET_KEYS = new Set(['level', 'time', 'msg', 'service', 'pid', 'hostname']);

/**
 * One JSON log line as a human reads it on a terminal:
 *   10:00:01.123 INFO  request completed GET /api/external/balance 200 3.2ms  request_id=…
 * Used in APP_ENV=local when stdout is a terminal; pipes and files keep the JSON lines.
 */
export function prettyLine(json: string, colour = true): string {
  let o: Record<string, unknown>;
  try {
    o = JSON.parse(json) as Record<string, unknown>;
  } catch {
    return json;
  }
  const level = Number(o.level);
  const paint = (code: number, s: string) => (colour ? `\u001b[${code}m${s}\u001b[0m` : s);
  const time = typeof o.time === 'string' ? o.time.slice(11, 23) : '';
  const parts: string[] = [paint(90, time), paint(COLOURS[level] ?? 0, LEVELS[level] ?? String(o.level)), String(o.msg ?? '')];
  if (o.method && o.url) parts.push(`${o.method} ${o.url} ${o.status ?? ''}${o.ms !== undefined ? ` ${o.ms}ms` : ''}`.trim());
  const rest = Object.entries(o)
    .filter(([k]) => !QUIET_KEYS.has(k) && !['method', 'url', 'status', 'ms'].includes(k))
    .map(([k, v]) => `${k}=${typeof v === 'string' ? v : JSON.stringify(v)}`);
  if (rest.length) parts.push(paint(90, rest.join(' ')));
  return parts.join(' ') + '\n';
}

/** A pino destination writing prettyLine()s. */
export function prettyDestination(out: { write(s: string): unknown } = process.stdout, colour = !process.env.NO_COLOR): { write(line: string): void } {
  return { write: (line: string) => void out.write(prettyLine(line, colour)) };
}
