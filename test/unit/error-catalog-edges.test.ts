import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { z } from 'zod';
import { describe, expect, it } from 'vitest';
import { authenticate } from '../../src/auth/credentials.js';
import { DomainError, ERROR_CATALOG, type ErrorCode } from '../../src/errors/catalog.js';
import { parseFields } from '../../src/errors/fields.js';
import { BOLETO_ERRORS, BOLETO_WIRE, domainErrorToBoleto } from '../../src/http/boletoErrors.js';
import { asHttpError, domainErrorToHttp, ERROR_STATUS } from '../../src/http/errorMap.js';
import { credentialsRefused, HttpError, SHAPE1 } from '../../src/http/errors.js';
import type { Clock } from '../../src/lib/clock.js';

describe('catalog codes with a wire form of their own (POST /webhooks)', () => {
  it('webhook_url_refused is shape 3, {worked: false, detail}, 422, whatever the route shape', () => {
    const err = new DomainError('webhook_url_refused', { detail: 'URL must use HTTPS' });
    for (const shape of ['business', 'business_worked', 'operation'] as const) {
      const http = domainErrorToHttp(err, shape);
      expect(http.statusCode).toBe(422);
      expect(http.body).toEqual({ worked: false, detail: 'URL must use HTTPS' });
    }
  });

  it('invalid_events is {errors: {events: [message]}}, 400', () => {
    const http = domainErrorToHttp(new DomainError('invalid_events', { message: "can't be blank" }));
    expect(http.statusCode).toBe(400);
    expect(http.body).toEqual({ errors: { events: ["can't be blank"] } });
  });
});

describe('the boleto edge: catalog codes to its UPPER_CASE wire codes', () => {
  it('answers each mapped code at its one status (ERROR_STATUS and BOLETO_ERRORS agree)', () => {
    for (const [code, wire] of Object.entries(BOLETO_WIRE) as Array<[ErrorCode, keyof typeof BOLETO_ERRORS]>) {
      expect([code, BOLETO_ERRORS[wire]]).toEqual([code, ERROR_STATUS[code]]);
    }
  });

  it('puts a field map in details.fields under VALIDATION_ERROR, other refusals keep message and extra as details', () => {
    const invalid = domainErrorToBoleto(new DomainError('bad_request', { fields: { 'boleto.due_date': ['must be between a and b'] } }))!;
    expect([invalid.code, invalid.statusCode, invalid.message, invalid.details]).toEqual([
      'VALIDATION_ERROR',
      400,
      'The request has invalid fields',
      { fields: { 'boleto.due_date': ['must be between a and b'] } },
    ]);
    const exists = domainErrorToBoleto(new DomainError('boleto_already_exists', { message: 'A boleto with nosso_numero 7 already exists', extra: { nosso_numero: '7' } }))!;
    expect([exists.code, exists.statusCode, exists.message, exists.details]).toEqual(['BOLETO_ALREADY_EXISTS', 409, 'A boleto with nosso_numero 7 already exists', { nosso_numero: '7' }]);
    const mismatch = domainErrorToBoleto(new DomainError('boleto_payment_mismatch', { extra: { amount_cents: 100 } }))!;
    expect([mismatch.code, mismatch.statusCode, mismatch.message, mismatch.details]).toEqual(['PAYMENT_MISMATCH', 422, ERROR_CATALOG.boleto_payment_mismatch, { amount_cents: 100 }]);
    const missing = domainErrorToBoleto(new DomainError('not_found', { message: 'Boleto not found' }))!;
    expect([missing.code, missing.statusCode, missing.details]).toEqual(['NOT_FOUND', 404, {}]);
  });

  it('has no wire code for a refusal the boleto API never answers (the handler then answers 500)', () => {
    expect(domainErrorToBoleto(new DomainError('insufficient_balance'))).toBeUndefined();
  });
});

describe('asHttpError: the one way edge code reads a refusal', () => {
  it('keeps an HttpError, writes a DomainError in the asked shape, and is undefined for a fault', () => {
    const http = new HttpError(418, { errors: { teapot: 'short and stout' } });
    expect(asHttpError(http)).toBe(http);
    const err = new DomainError('conflict', { message: 'webhook is deleted' });
    expect(asHttpError(err)!.body).toEqual({ errors: { conflict: 'webhook is deleted' } });
    expect(asHttpError(err, 'operation')!.body).toEqual({ worked: false, errors: { conflict: 'webhook is deleted' }, code: 'conflict', detail: 'webhook is deleted' });
    expect(asHttpError(new Error('boom'))).toBeUndefined();
  });
});

describe('domain validation without HTTP', () => {
  it('parseFields throws bad_request with the field map the edge writes as 400', () => {
    let thrown: unknown;
    try {
      parseFields(z.strictObject({ url: z.string() }), { extra: 1 });
    } catch (err) {
      thrown = err;
    }
    expect(thrown).toBeInstanceOf(DomainError);
    const http = domainErrorToHttp(thrown as DomainError);
    expect(http.statusCode).toBe(400);
    expect(http.body).toEqual({ errors: { bad_request: { url: ['is required'], extra: ['is not a permitted field'] } } });
  });

  it('authenticate names why credentials were refused; the edge writes the shape-1 401', async () => {
    const clock: Clock = { now: () => new Date('2026-01-01T00:00:00Z') };
    const none = async () => undefined;
    expect(await authenticate(none, clock, undefined)).toEqual({ refused: 'missingCredentials' });
    expect(await authenticate(none, clock, 'ApiKey cli_abc:secret')).toEqual({ refused: 'invalidCredentials' });
    const http = credentialsRefused('expiredKey');
    expect([http.statusCode, http.body]).toEqual([401, { error: { status: 401, message: SHAPE1.expiredKey } }]);
  });
});

describe('the domain and platform folders import nothing from src/http (their routes live in src/api/)', () => {
  const folders = ['src/merchants', 'src/webhooks', 'src/transactions', 'src/boleto', 'src/auth', 'src/errors', 'src/events', 'src/retention'];
  const files = folders.flatMap((dir) =>
    readdirSync(dir, { recursive: true, encoding: 'utf8' })
      .filter((f) => f.endsWith('.ts'))
      .map((f) => join(dir, f)),
  );

  it.each(files)('%s', (file) => {
    const imports = [...readFileSync(file, 'utf8').matchAll(/from '([^']+)'/g)].map((m) => m[1]!);
    expect(imports.filter((i) => /(^|\/)http\//.test(i))).toEqual([]);
  });
});
