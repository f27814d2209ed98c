import { randomUUID } from 'node:crypto';
import pino from 'pino';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { systemClock } from '../../src/lib/clock.js';
import type { RailNotification } from '../../src/rail/rail.js';
import * as store from '../../src/rail/sim/store.js';
import { SimulatedRail } from '../../src/rail/sim/simulatedRail.js';
import { BACKENDS, openTestDatabase, type TestDatabase } from '../helpers/db.js';

/**
 * Issue 25 (HA run: a sandbox resolve answered 200, the infraction stayed OPEN). A delivery holds the
 * leased rows' surrogate ids in memory while the handler runs. A failover loses the primary's
 * unreplicated tail — a notification visible there (committed locally, waiting for its standby) and
 * the sequence values it took — so the new primary hands the same id to the next notification. The
 * delivery that finishes then must not delete or defer that other notification: it names the row it
 * leased by its notification id as well.
 */
describe.each(BACKENDS)('the rail deletes only the notifications it delivered, on %s', (backend) => {
  let t: TestDatabase;
  beforeEach(async () => {
    t = await openTestDatabase(backend);
  });
  afterEach(async () => t?.close());

  const enqueue = (notificationId: string, subject: string) =>
    t.db.transaction((tx) =>
      store.enqueueNotification(tx, {
        notificationId,
        subject,
        kind: 'infraction.resolved',
        payload: { kind: 'infraction.resolved', infractionId: notificationId, endToEndId: subject, decision: 'rejected', resolvedAt: new Date().toISOString() },
        createdAt: new Date(),
      }),
    );

  /** The old primary's row is gone with it, and the sequence stands where the standby last saw it: the next row gets the same id. */
  const loseRowAndItsId = async (id: number) => {
    await t.db.query('DELETE FROM sim_notifications WHERE id = $1', [id]);
    await t.db.query(`SELECT setval(pg_get_serial_sequence('sim_notifications', 'id'), $1::bigint, false)`, [id]);
  };

  for (const outcome of ['applied', 'failed'] as const) {
    it(`a delivery that ${outcome === 'applied' ? 'succeeds' : 'fails'} after its row's id was reused leaves the new notification queued`, async () => {
      const sim = new SimulatedRail({
        db: t.db,
        institutionIspb: '99999999',
        institutionName: 'Test',
        clock: systemClock,
        log: pino({ level: 'silent' }),
        settlementMs: 0,
        protectionMs: 0,
        seed: 1,
      });
      let release!: () => void;
      const gate = new Promise<void>((r) => (release = r));
      const seen: string[] = [];
      sim.onNotification(async (n: RailNotification) => {
        seen.push(n.id);
        if (seen.length === 1) {
          await gate;
          if (outcome === 'failed') throw new Error('the service could not apply it');
        }
      });

      const lost = `infraction.resolved:${randomUUID()}`;
      await enqueue(lost, 'E-lost');
      const [{ id } = { id: 0 }] = await t.db.query<{ id: number }>('SELECT id::int AS id FROM sim_notifications WHERE notification_id = $1', [lost]);
      const delivering = sim.tick();
      while (seen.length === 0) await new Promise((r) => setTimeout(r, 5));

      // The failover: the leased row and its id are lost; the next notification takes the id.
      await loseRowAndItsId(id);
      const next = `infraction.resolved:${randomUUID()}`;
      await enqueue(next, 'E-next');
      const [reused] = await t.db.query<{ id: number }>('SELECT id::int AS id FROM sim_notifications WHERE notification_id = $1', [next]);
      expect(reused?.id).toBe(id);

      release();
      await delivering;
      const left = await t.db.query<{ notification_id: string; locked_until: Date | null }>('SELECT notification_id, locked_until FROM sim_notifications');
      // The other notification is still queued, and not deferred by the failed delivery.
      expect(left.map((r) => r.notification_id)).toEqual([next]);
      expect(left[0]!.locked_until).toBeNull();
      // ...and is delivered by the next claim.
      await sim.tick();
      expect(seen).toContain(next);
      expect(await t.db.query('SELECT 1 FROM sim_notifications')).toEqual([]);
    });
  }
});
