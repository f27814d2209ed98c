import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { DurableNonces } from '../../src/auth/nonceStore.js';
import { loadMigrations, migrate } from '../../src/db/migrate.js';
import { dayStart, partitionName } from '../../src/db/partitions.js';
import { IdempotencyStore } from '../../src/external/idempotency.js';
import { recordNotification } from '../../src/pix/store/railInbox.js';
import { ensurePartitions } from '../../src/retention/partitions.js';
import { BACKENDS, openEmptyDatabase } from '../helpers/db.js';

/**
 * Migration 0910 over a database that already holds nonces, rail inbox ids and idempotency records
 * written the old way: the answers move to idempotency_responses (and still replay byte for byte),
 * and a nonce or a notification id recorded before the migration — whose signed timestamp or own
 * time was never stored — is still refused on every day its true key could fall on.
 */

const DAY_MS = 86_400_000;

describe.each(BACKENDS)('migration 0910 over existing rows on %s', (backend) => {
  it('moves the answers out of idempotency_keys and records old nonces and inbox ids under every day they could belong to', async () => {
    const { db, close } = await openEmptyDatabase(backend);
    try {
      const all = loadMigrations();
      await migrate(db, all.filter((m) => m.name < '0910'));
      const [merchant] = await db.query<{ id: number }>("INSERT INTO merchants (name, document) VALUES ('Loja', '11444777000161') RETURNING id");
      const scope = { merchantId: merchant!.id, method: 'POST', path: '/api/external/pix/cash-out', key: 'old-key-0001' };
      const expires = new Date(Date.now() + 20 * 3_600_000);
      await db.query(
        `INSERT INTO idempotency_keys (merchant_id, method, path, key, request_hash, status, owner_token, locked_until, response_status, response_body, expires_at)
         VALUES ($1, $2, $3, $4, 'h', 'completed', $5, now(), 201, '{"answer":"as sent"}', $6),
                ($1, $2, $3, 'old-key-0002', 'h', 'in_progress', $5, now() + interval '1 minute', NULL, NULL, $6)`,
        [scope.merchantId, scope.method, scope.path, scope.key, randomUUID(), expires],
      );
      // A nonce claimed 100 s after midnight: signed between 200 s before midnight and 400 s after.
      const midnight = dayStart(new Date()).getTime();
      const claimedAt = midnight + 100_000;
      await db.query(`INSERT INTO request_nonces (client_id, nonce, fingerprint, expires_at) VALUES ('cli_1', 'old-nonce-000000001', 'sig-1', $1)`, [new Date(claimedAt + 600_000)]);
      // A notification applied 60 s after midnight: its own time may be on the day before.
      const processedAt = new Date(midnight + 60_000);
      await db.query(`INSERT INTO rail_inbox (notification_id, kind, processed_at) VALUES ('n-old-1', 'inbound.payment', $1)`, [processedAt]);

      expect(await migrate(db)).toEqual(all.filter((m) => m.name >= '0910').map((m) => m.name));
      await ensurePartitions(db, new Date(midnight - DAY_MS));

      // Idempotency: the answer replays from its new table; the claim in progress is still held.
      const columns = await db.query<{ column_name: string }>(
        `SELECT column_name FROM information_schema.columns WHERE table_schema = current_schema() AND table_name = 'idempotency_keys' AND column_name LIKE 'response%' ORDER BY 1`,
      );
      expect(columns.map((c) => c.column_name)).toEqual(['response_status']);
      const store = new IdempotencyStore(db, { now: () => new Date() });
      expect(await store.claim(scope, 'h')).toEqual({ kind: 'replay', answer: { statusCode: 201, body: '{"answer":"as sent"}' } });
      expect(await db.query('SELECT count(*)::int AS n FROM idempotency_responses')).toEqual([{ n: 1 }]);

      // The nonce: under the day before and the day of its claim; refused whichever day it was signed on.
      const days = await db.query<{ d: Date }>(`SELECT signed_day AS d FROM request_nonces ORDER BY signed_day`);
      expect(days.map((r) => new Date(r.d).getTime())).toEqual([midnight - DAY_MS, midnight]);
      const nonces = new DurableNonces(db, { now: () => new Date(claimedAt + 10_000) });
      for (const signedAt of [claimedAt - 290_000, claimedAt + 290_000]) {
        expect(await nonces.claim('cli_1', 'old-nonce-000000001', 'sig-2', 600, new Date(signedAt))).toEqual({ claim: 'conflict', fingerprint: 'sig-1' });
        expect((await nonces.claim('cli_1', 'old-nonce-000000001', 'sig-1', 600, new Date(signedAt))).claim).toBe('repeat');
      }

      // The inbox id: a redelivery is recognised whether the notification's time was that day or the day before.
      for (const at of [new Date(processedAt.getTime() - 30_000), new Date(processedAt.getTime() - 120_000)]) {
        expect(await db.transaction((tx) => recordNotification(tx, 'n-old-1', 'inbound.payment', at))).toBe(false);
      }
      expect(await db.transaction((tx) => recordNotification(tx, 'n-new-1', 'inbound.payment', processedAt))).toBe(true);
      const [where] = await db.query<{ t: string }>(`SELECT tableoid::regclass::text AS t FROM rail_inbox WHERE notification_id = 'n-new-1'`);
      // Today's rows sit in the default partition: the moved rows of today are there, so today's
      // partition is left to it (as for 0800); the next days have theirs.
      expect(where!.t).toBe('rail_inbox_default');
      const [tomorrow] = await db.query<{ t: string }>(
        `INSERT INTO rail_inbox (notification_id, kind, notified_day) VALUES ('n-new-2', 'payment.settled', $1) RETURNING tableoid::regclass::text AS t`,
        [new Date(midnight + DAY_MS)],
      );
      expect(tomorrow!.t).toBe(partitionName('rail_inbox', new Date(midnight + DAY_MS)));
    } finally {
      await close();
    }
  }, 180_000); // every migration from an empty database, on a loaded machine
});
