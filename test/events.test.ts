import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { emitEvent } from '../src/events/outbox.js';
import { createMerchant } from '../src/merchants/service.js';
import { openTestDatabase, type TestDatabase } from './helpers/db.js';
import { validCnpj } from './helpers/fixtures.js';

describe('transactional outbox', () => {
  let t: TestDatabase;
  let ids: { merchantId: number; accountId: number };
  beforeAll(async () => {
    t = await openTestDatabase('pglite');
    const { merchant, account } = await createMerchant(t.db, { name: 'Outbox', document: validCnpj() });
    ids = { merchantId: merchant.id, accountId: account.id };
  });
  afterAll(async () => t?.close());

  const payloadOf = async (eventId: string) =>
    (await t.db.query<{ payload: Record<string, unknown> }>('SELECT payload FROM outbox_events WHERE event_id = $1', [eventId]))[0]!.payload;

  it('the body carries the event name and the catalog status unless the emitter gives one', async () => {
    const a = await t.db.transaction((tx) => emitEvent(tx, { event: 'pix.payout.held', ...ids, subject: 'S1', payload: { transaction_id: 'S1' } }));
    expect(await payloadOf(a)).toEqual({ event: 'pix.payout.held', status: 'processing', transaction_id: 'S1' });
    const b = await t.db.transaction((tx) => emitEvent(tx, { event: 'pix.infraction.resolved', ...ids, subject: 'S2', payload: { status: 'CANCELLED' } }));
    expect(await payloadOf(b)).toEqual({ event: 'pix.infraction.resolved', status: 'CANCELLED' });
  });

  it('refuses an event outside the catalog, and writes nothing when the transaction rolls back', async () => {
    await expect(t.db.transaction((tx) => emitEvent(tx, { event: 'pix.made.up', ...ids, subject: 'S3', payload: {} }))).rejects.toThrow('not in the catalog');
    await expect(
      t.db.transaction(async (tx) => {
        await emitEvent(tx, { event: 'pix.charge.paid', ...ids, subject: 'S4', payload: {} });
        throw new Error('state change failed');
      }),
    ).rejects.toThrow('state change failed');
    expect(await t.db.query("SELECT 1 FROM outbox_events WHERE subject IN ('S3', 'S4')")).toEqual([]);
  });
});
