import { createHmac } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { catalogEntry } from '../../src/events/catalog.js';
import { BACKENDS } from '../helpers/db.js';
import { addPixKey, merchantWithKey } from '../helpers/client.js';
import { reportInfraction, resolveInfraction } from '../helpers/med.js';
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

  it('a paid charge and its MED dispute: pix.charge.paid, then the infraction’s events in order, signed, each once', async () => {
    const m = await merchantWithKey(s);
    await addPixKey(s, m.accountId, 'evp');
    const events = [
      'pix.charge.paid',
      'pix.infraction.created',
      'pix.refund.requested',
      'pix.infraction.defense_submitted',
      'pix.infraction.resolved',
      'pix.refund.completed',
    ];
    const hook = await m.client.post('/webhooks', { url: `${r.url}/med`, events, allow_insecure: true });
    expect(hook.status).toBe(201);

    const charge = (await m.client.post('/pix/cash-in', { amount: 4200 })).body;
    const paid = (await sandbox(s, 'POST', '/pix/pay', { emv: charge.emv })).body;
    const id = (await reportInfraction(s, { end_to_end_id: paid.end_to_end_id })).body.id;
    expect((await m.client.post(`/med/${id}/defense`, { text: 'Pedido entregue' })).status).toBe(201);
    expect((await resolveInfraction(s, id, 'accepted')).status).toBe(200);

    const mine = () => r.received.filter((y) => y.path === '/med');
    await r.waitFor(() => mine().filter((y) => y.body.infraction_id === id).length === 5 && mine().some((y) => y.body.event === 'pix.charge.paid'));
    const med = mine().filter((y) => y.body.infraction_id === id);
    expect(med.map((y) => [y.headers['x-service-event'], y.body.status])).toEqual([
      ['pix.infraction.created', 'OPEN'],
      ['pix.refund.requested', 'requested'],
      ['pix.infraction.defense_submitted', 'defense_submitted'],
      ['pix.infraction.resolved', 'CLOSED'],
      ['pix.refund.completed', 'settled'],
    ]);
    expect(med[4]!.body).toMatchObject({ amount: 420_000, original_transaction_id: charge.transaction_id, total_refunded: 420_000, remaining_refundable: 0, is_partial: false });
    const chargePaid = mine().find((y) => y.body.event === 'pix.charge.paid')!;
    expect(chargePaid.body).toMatchObject({ status: 'paid', transaction_id: charge.transaction_id, txid: charge.txid, amount: 420_000 });
    for (const y of mine()) expect(y.headers['x-service-signature']).toBe(createHmac('sha256', hook.body.secret).update(y.raw).digest('hex'));
    expect(new Set(mine().map((y) => y.headers['x-service-delivery'])).size).toBe(mine().length);
  });
});
