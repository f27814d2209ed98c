import { describe, expect, it } from 'vitest';
import { runRetention } from '../src/retention/retention.js';
import { BACKENDS } from './helpers/db.js';
import { startTestServer } from './helpers/server.js';

/** Issue 10: the retention worker purges by age, in batches until done, never what is still needed. */
describe.each(BACKENDS)('retention on %s', (backend) => {
  it('purges old rail_inbox ids and final old events in batches until done; keeps undispatched events', async () => {
    const s = await startTestServer({ backend, workers: false, env: { RETENTION_BATCH_SIZE: '3' } });
    try {
      const db = s.ctx.db;
      const old = new Date(Date.now() - 40 * 86_400_000);
      for (let i = 0; i < 10; i++) {
        await db.query('INSERT INTO rail_inbox (notification_id, kind, processed_at) VALUES ($1, $2, $3)', [`n-old-${i}`, 'inbound.payment', old]);
        await db.query(`INSERT INTO outbox_events (event, subject, payload, created_at, dispatched_at) VALUES ('webhook.test', $1, '{}', $2, $2)`, [`s-old-${i}`, old]);
      }
      await db.query('INSERT INTO rail_inbox (notification_id, kind) VALUES ($1, $2)', ['n-new', 'inbound.payment']);
      await db.query(`INSERT INTO outbox_events (event, subject, payload, created_at) VALUES ('webhook.test', 's-undispatched', '{}', $1)`, [old]);
      const clock = { now: () => new Date() };
      const report = await runRetention({ db, clock, config: s.ctx.config });
      expect(report).toMatchObject({ rail_inbox: 10, events: 10 });
      expect((await db.query('SELECT notification_id FROM rail_inbox')).map((r: any) => r.notification_id)).toEqual(['n-new']);
      expect((await db.query('SELECT subject FROM outbox_events')).map((r: any) => r.subject)).toEqual(['s-undispatched']);
    } finally {
      await s.close();
    }
  });
});
