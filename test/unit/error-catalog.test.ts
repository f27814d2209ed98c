import { describe, expect, it } from 'vitest';
import { DomainError, ERROR_CATALOG, invalidFields, newFieldMap, addField } from '../../src/errors/catalog.js';
import { domainErrorToHttp, ERROR_STATUS } from '../../src/http/errorMap.js';

describe('the closed error catalog and its one status per code', () => {
  it('has a status for exactly the codes of the catalog', () => {
    expect(Object.keys(ERROR_STATUS).sort()).toEqual(Object.keys(ERROR_CATALOG).sort());
  });

  it('writes the operation shape (cash-out, TEF) with extra fields first', () => {
    const err = new DomainError('destination_inactive', { detail: 'account acc_1 is blocked', extra: { transaction_id: 't1', status: 'failed' } });
    const http = domainErrorToHttp(err, 'operation');
    expect(http.statusCode).toBe(422);
    expect(http.body).toEqual({
      worked: false,
      transaction_id: 't1',
      status: 'failed',
      errors: { destination_inactive: ERROR_CATALOG.destination_inactive },
      code: 'destination_inactive',
      detail: 'account acc_1 is blocked',
    });
  });

  it('writes the business shape, with worked: false only where the route asks for it', () => {
    const err = new DomainError('not_found', { message: 'Refund not found' });
    expect(domainErrorToHttp(err, 'business').body).toEqual({ errors: { not_found: 'Refund not found' } });
    expect(domainErrorToHttp(err, 'business_worked').body).toEqual({ worked: false, errors: { not_found: 'Refund not found' } });
    expect(domainErrorToHttp(err).statusCode).toBe(404);
  });

  it('carries a field map for bad_request, with a readable detail', () => {
    const fields = newFieldMap();
    addField(fields, 'amount', 'is required');
    addField(fields, 'constructor', 'is not permitted');
    const http = domainErrorToHttp(invalidFields(fields), 'operation');
    expect(http.statusCode).toBe(400);
    expect(http.body).toMatchObject({ errors: { bad_request: { amount: ['is required'], constructor: ['is not permitted'] } }, code: 'bad_request' });
    expect((http.body as { detail: string }).detail).toBe('amount is required; constructor is not permitted');
  });

  it('gives insufficient_balance one status (400, the spec cash-out table) whatever the operation', () => {
    expect(ERROR_STATUS.insufficient_balance).toBe(400);
  });
});
