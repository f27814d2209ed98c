import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { loggerOptions, prettyDestination, prettyLine } from '../../src/logger.js';

describe('readable log lines (local mode on a terminal)', () => {
  it('formats a request line: time, level, message, method, path, status, duration, then the other fields', () => {
    const line = prettyLine('{"level":30,"time":"2026-11-23T10:00:01.123Z","service":"pixgate","pid":1,"request_id":"r-1","method":"GET","url":"/api/external/balance","status":200,"ms":3.2,"msg":"request completed"}', false);
    expect(line).toBe('10:00:01.123 INFO  request completed GET /api/external/balance 200 3.2ms request_id=r-1\n');
  });

  it('keeps redaction: secrets are censored before formatting', () => {
    const out: string[] = [];
    const log = pino(loggerOptions('info'), prettyDestination({ write: (s: string) => out.push(s) }, false));
    log.info({ client_secret: 'sk_live_secret', headers: { authorization: 'ApiKey a:b' } }, 'hello');
    expect(out.join('')).toContain('hello');
    expect(out.join('')).not.toContain('sk_live_secret');
    expect(out.join('')).not.toContain('ApiKey a:b');
  });
});
