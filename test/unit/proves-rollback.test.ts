import { describe, expect, it } from 'vitest';
import { provesRollback } from '../../src/db/db.js';

/**
 * Issue 24, item 5: only SQLSTATEs that prove the statement was rolled back let a caller write again
 * as if nothing happened (src/db/db.ts, provesRollback). 57P01/57P02, 08xxx and XX000 can be
 * reported after an autocommit statement committed.
 */
const err = (code: unknown) => Object.assign(new Error('x'), { code });

describe('provesRollback', () => {
  it.each(['23505', '23514', '23503', '22003', '22P02', '21000', '42P01', '42703', 'P0001', 'P0004', '40001', '40P01', '55P03'])(
    '%s proves a rollback, in a transaction or not',
    (code) => {
      expect(provesRollback(err(code), false)).toBe(true);
      expect(provesRollback(err(code), true)).toBe(true);
    },
  );

  it.each(['57P01', '57P02', '57P03', '08006', '08003', '08000', 'XX000', 'XX001', '53100', '53200', '58030', '40003', '25P02', '0A000'])(
    '%s does not (it may follow a commit)',
    (code) => {
      expect(provesRollback(err(code), false)).toBe(false);
      expect(provesRollback(err(code), true)).toBe(false);
    },
  );

  it('57014 (statement_timeout, cancel) proves it only inside an explicit transaction', () => {
    expect(provesRollback(err('57014'), true)).toBe(true);
    expect(provesRollback(err('57014'), false)).toBe(false);
  });

  it('no SQLSTATE (a socket error, a driver error, anything else) proves nothing', () => {
    for (const e of [err('ECONNRESET'), err('ECONNREFUSED'), err(undefined), err(23505), new Error('Connection terminated unexpectedly'), null, undefined, 'x']) {
      expect(provesRollback(e, false)).toBe(false);
      expect(provesRollback(e, true)).toBe(false);
    }
  });
});
