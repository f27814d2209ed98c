import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { merchantWithKey, type MerchantFixture } from '../helpers/client.js';
import { BACKENDS } from '../helpers/db.js';
import { foreignKey, SIM_FAST, txRow, waitFor } from '../helpers/pix.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

/**
 * Issue 11 case 4: walking GET /statement the way the spec prescribes ("iterate pages until data is
 * empty or shorter than per_page") reaches every record, in-flight payouts included, exactly once,
 * and no page is longer than per_page — also when more payouts are in flight than per_page.
 */
describe.each(BACKENDS)('statement walk with more payouts in flight than per_page on %s', (backend) => {
  let s: TestServer;
  let m: MerchantFixture;
  const held: string[] = [];
  const deposits: string[] = [];
  beforeAll(async () => {
    s = await startTestServer({ backend, env: SIM_FAST });
    m = await merchantWithKey(s, { depositCents: 100_000 });
    const [first] = await s.ctx.db.query<{ transaction_id: string }>('SELECT transaction_id FROM transactions WHERE account_id = $1', [m.accountId]);
    deposits.push(first!.transaction_id);
    const hold = await foreignKey(s, { behavior: 'hold' });
    for (let i = 0; i < 7; i++) {
      const res = await m.client.post('/pix/cash-out', { amount: 100 + i, pix_key: hold });
      expect(res.status, res.text).toBe(200);
      held.push(res.body.transaction_id);
      if (i % 2 === 0) {
        const d = await s.admin('POST', `/accounts/${m.accountId}/deposits`, { amount: 10 + i });
        deposits.push(d.body.transaction_id);
      }
    }
    for (const id of held) await waitFor(() => txRow(s.ctx.db, id), (r) => r.held_at !== null);
  });
  afterAll(async () => s?.close());

  async function walk(query: string, perPage: number): Promise<{ ids: string[]; sizes: number[] }> {
    const ids: string[] = [];
    const sizes: number[] = [];
    for (let page = 1; page < 50; page++) {
      const res = await m.client.get(`/statement?per_page=${perPage}&page=${page}${query}`);
      expect(res.status, res.text).toBe(200);
      sizes.push(res.body.data.length);
      ids.push(...res.body.data.map((d: any) => d.transaction_id));
      if (res.body.data.length < perPage) break;
    }
    return { ids, sizes };
  }

  it('every in-flight payout and every other record once, pages never longer than per_page', async () => {
    for (const perPage of [1, 2, 3, 5, 7, 8, 20]) {
      const { ids, sizes } = await walk('', perPage);
      for (const size of sizes) expect(size).toBeLessThanOrEqual(perPage);
      expect(new Set(ids).size, `per_page ${perPage}: ${ids.join(',')}`).toBe(ids.length);
      expect([...ids].sort()).toEqual([...held, ...deposits].sort());
      // The in-flight payouts lead, newest first.
      expect(ids.slice(0, held.length)).toEqual([...held].reverse());
    }
  });

  it('status=processing: every in-flight payout once, pages never longer than per_page', async () => {
    for (const perPage of [1, 2, 3, 6, 7, 100]) {
      const { ids, sizes } = await walk('&status=processing', perPage);
      for (const size of sizes) expect(size).toBeLessThanOrEqual(perPage);
      expect(ids).toEqual([...held].reverse());
    }
    const settled = await walk('&status=settled', 2);
    expect([...settled.ids].sort()).toEqual([...deposits].sort());
  });
});
