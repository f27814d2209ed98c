import { createHmac } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { catalogEntry } from '../../src/events/catalog.js';
import { BACKENDS } from '../helpers/db.js';
import { merchantWithKey } from '../helpers/client.js';
import { foreignKey, sandbox, SIM_FAST } from '../helpers/pix.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { startReceiver, type Receiver } from './helpers.js';

/** The PIX domain's real events, from state change to a merchant's receiver. */
describe.each(BACKENDS)('webhooks end to end with the PIX domain on %s', (backend) => {
  let s: TestServer;
  let r: Receiver;
  beforeAll(async () => {
    r = await startReceiver();
    s = await startTestServer({ backend, env: { ...SIM_FAST, WEBHOOK_ALLOWED_HOSTS: r.hostPort } });
  });
  afterAll(async () => {
    await s?.close();
    await r?.close();
  });

  it('a settled cash-out and an inbound PIX reach the receiver signed, in order, with the catalog status', async () => {
    const m = await merchantWithKey(s, { depositCents: 100_000 });
    const hook = await m.client.post('/webhooks', {
      url: `${r.url}/pix`,
      events: ['pix.payout.processing', 'pix.payout.confirmed', 'pix.charge.paid'],
      allow_insecure: true,
    });
    expect(hook.status).toBe(201);

    const key = await foreignKey(s, { behavior: 'settle' });
    const cashOut = await m.client.post('/pix/cash-out', { amount: 1234, pix_key: key, pix_key_type: 'email' });
    expect(cashOut.status).toBe(200);
    const inbound = await sandbox(s, 'POST', '/pix/inbound', { account_id: m.accountId, amount: 500 });
    expect(inbound.status).toBe(201);

    const txId = cashOut.body.transaction_id as string;
    await r.waitFor((x) => x.filter((y) => y.body.transaction_id === txId).length === 2 && x.some((y) => y.body.transaction_id === inbound.body.transaction_id));
    const payout = r.received.filter((y) => y.body.transaction_id === txId);
    expect(payout.map((y) => y.headers['x-service-event'])).toEqual(['pix.payout.processing', 'pix.payout.confirmed']);
    for (const y of r.received) {
      expect(y.headers['x-service-signature']).toBe(createHmac('sha256', hook.body.secret).update(y.raw).digest('hex'));
      expect(y.body.event).toBe(y.headers['x-service-event']);
      expect(y.body.status).toBe(catalogEntry(y.body.event)!.status);
    }
    expect(payout[1]!.body).toMatchObject({ transaction_id: txId, amount: 123_400, end_to_end_id: cashOut.body.end_to_end_id });
    const paid = r.received.find((y) => y.body.transaction_id === inbound.body.transaction_id)!;
    expect(paid.body).toMatchObject({ event: 'pix.charge.paid', status: 'paid', amount: 50_000 });
  });
});
