import { describe, expect, it } from 'vitest';
import { balanceJson, balanceView } from '../../src/external/account.routes.js';
import { convertKeys, snakeToCamel } from '../../src/lib/keyCase.js';

describe('GET /balance written directly', () => {
  const cases = [
    { available: 0, blocked: 0, pending: 0, ledgerTotal: 0, safe: 0 },
    { available: 1_234_500, blocked: 10, pending: 7, ledgerTotal: 1_234_517, safe: 1_234_500 },
    { available: -5, blocked: 5, pending: Number.MAX_SAFE_INTEGER - 1, ledgerTotal: Number.MAX_SAFE_INTEGER, safe: -9_007_199_254_740_991 },
  ];
  it('is byte for byte what the generic serialisation gives, in both key cases', () => {
    for (const b of cases) {
      const asOf = new Date(1_795_000_000_123).toISOString();
      const view = balanceView(42, b, asOf);
      expect(balanceJson(42, b, asOf, false)).toBe(JSON.stringify(view));
      expect(balanceJson(42, b, asOf, true)).toBe(JSON.stringify(convertKeys(view, snakeToCamel)));
    }
  });
});
