import { createHmac } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { addPixKey, merchantWithKey } from '../helpers/client.js';
import { BACKENDS } from '../helpers/db.js';
import { reportInfraction, resolveInfraction } from '../helpers/med.js';
import { sandbox, SIM_FAST } from '../helpers/pix.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { startReceiver, type Receiver } from '../webhooks/helpers.js';

/** A paid charge and its MED dispute, from state change to a merchant's webhook receiver. */
describe.each(BACKENDS)('MED and charge events reach a webhook receiver on %s', (backend) => {
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

  it('pix.charge.paid, then the infraction’s events in order, signed, each once', async () => {
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

    await r.waitFor((x) => x.filter((y) => y.body.infraction_id === id).length === 5 && x.some((y) => y.body.event === 'pix.charge.paid'));
    const med = r.received.filter((y) => y.body.infraction_id === id);
    expect(med.map((y) => [y.headers['x-service-event'], y.body.status])).toEqual([
      ['pix.infraction.created', 'OPEN'],
      ['pix.refund.requested', 'requested'],
      ['pix.infraction.defense_submitted', 'defense_submitted'],
      ['pix.infraction.resolved', 'CLOSED'],
      ['pix.refund.completed', 'settled'],
    ]);
    expect(med[4]!.body).toMatchObject({ amount: 420_000, original_transaction_id: charge.transaction_id, total_refunded: 420_000, remaining_refundable: 0, is_partial: false });
    const chargePaid = r.received.find((y) => y.body.event === 'pix.charge.paid')!;
    expect(chargePaid.body).toMatchObject({ status: 'paid', transaction_id: charge.transaction_id, txid: charge.txid, amount: 420_000 });
    for (const y of r.received) expect(y.headers['x-service-signature']).toBe(createHmac('sha256', hook.body.secret).update(y.raw).digest('hex'));
    expect(new Set(r.received.map((y) => y.headers['x-service-delivery'])).size).toBe(r.received.length);
  });
});
