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
