import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BACKENDS } from '../helpers/db.js';
import { addPixKey, merchantWithKey, type MerchantFixture } from '../helpers/client.js';
import { foreignKey, SIM_FAST } from '../helpers/pix.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

/**
 * Issue 10, defect 7: an absent `description`, `null` and `""` are one command for external_id —
 * a harmless repeat is answered with the original record, never 409.
 */
describe.each(BACKENDS)('external_id fingerprints have one canonical form of description, on %s', (backend) => {
  let s: TestServer;
  let m: MerchantFixture;
  let receiver: string;
  beforeAll(async () => {
    s = await startTestServer({ backend, env: SIM_FAST });
    m = await merchantWithKey(s, { depositCents: 100_000 });
    await addPixKey(s, m.accountId, 'evp');
    receiver = await foreignKey(s);
  });
  afterAll(async () => s?.close());

  it('cash-out: absent, null and "" description repeat the same order', async () => {
    const base = { amount: 300, pix_key: receiver, external_id: 'fp-cash-out-1' };
    const first = await m.client.post('/pix/cash-out', base);
    expect(first.status).toBe(200);
    for (const description of ['', null, '   ']) {
      const again = await m.client.post('/pix/cash-out', { ...base, description });
      expect(again.status).toBe(200);
      expect(again.body.transaction_id).toBe(first.body.transaction_id);
    }
    // A real description is another command.
    expect((await m.client.post('/pix/cash-out', { ...base, description: 'Fornecedor' })).status).toBe(409);
  });

  it('cash-out: "" first, absent later is the same order too', async () => {
    const base = { amount: 300, pix_key: receiver, external_id: 'fp-cash-out-2' };
    const first = await m.client.post('/pix/cash-out', { ...base, description: '' });
    const again = await m.client.post('/pix/cash-out', base);
    expect(again.status).toBe(200);
    expect(again.body.transaction_id).toBe(first.body.transaction_id);
  });

  it('cash-in charge: absent, null and "" description repeat the same charge', async () => {
    const base = { amount: 4200, external_id: 'fp-charge-1' };
    const first = await m.client.post('/pix/cash-in', base);
    expect(first.status).toBe(201);
    for (const description of ['', null, '  ']) {
      const again = await m.client.post('/pix/cash-in', { ...base, description });
      expect(again.status).toBe(200);
      expect(again.body.transaction_id).toBe(first.body.transaction_id);
    }
    expect((await m.client.post('/pix/cash-in', { ...base, description: 'Pedido 9' })).status).toBe(409);
  });
});
