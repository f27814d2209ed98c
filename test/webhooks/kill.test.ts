import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import type { Database, Sql } from '../../src/db/db.js';
import { migrate } from '../../src/db/migrate.js';
import { openPglite } from '../../src/db/pglite.js';
import { emitEvent } from '../../src/events/outbox.js';
import { createTestSchema } from '../helpers/db.js';
import { startPixgate, type PixgateProcess } from '../helpers/process.js';
import { merchantWithWebhook, startReceiver, waitUntil, type Receiver } from './helpers.js';

/**
 * A pixgate process killed with SIGKILL while deliveries are in flight loses none of them: after a
 * restart every event reaches the receiver (at least once; a repeat carries the same delivery id).
 * Events are written straight into the outbox with emitEvent, as the PIX domains do.
 */

const SUBJECTS = 10;
const STEPS = 6;
const ADMIN_TOKEN = 'kill-test-admin-token-0123';
const dirs: string[] = [];
afterAll(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

/** A receiver that answers 200 after 100 ms, so that several deliveries are always in flight. */
async function slowReceiver(): Promise<Receiver> {
  return startReceiver((_req, res) => void setTimeout(() => res.writeHead(200).end(), 100));
}

async function emitAll(db: Database, ids: { merchantId: number; accountId: number }) {
  await db.transaction(async (tx: Sql) => {
    for (let n = 0; n < SUBJECTS * STEPS; n++) {
      const subject = `KILL-${n % SUBJECTS}`;
      await emitEvent(tx, { event: 'pix.charge.paid', ...ids, subject, payload: { status: 'paid', transaction_id: subject, n, step: Math.floor(n / SUBJECTS) } });
    }
  });
}

/** Every event arrived; repeats carry the same delivery id and body; first arrivals keep subject order. */
function checkReceived(r: Receiver) {
  const all = SUBJECTS * STEPS;
  expect(new Set(r.received.map((x) => x.body.n)).size).toBe(all);
  const bodyOf = new Map<string, string>();
  for (const x of r.received) {
    const id = x.headers['x-service-delivery'] as string;
    expect(bodyOf.get(id) ?? x.raw.toString()).toBe(x.raw.toString());
    bodyOf.set(id, x.raw.toString());
  }
  expect(bodyOf.size).toBe(all);
  const firstSteps = new Map<string, number[]>();
  const seen = new Set<number>();
  for (const x of r.received) {
    if (seen.has(x.body.n)) continue;
    seen.add(x.body.n);
    firstSteps.set(x.body.transaction_id, [...(firstSteps.get(x.body.transaction_id) ?? []), x.body.step]);
  }
  for (const steps of firstSteps.values()) expect(steps).toEqual(Array.from({ length: STEPS }, (_, i) => i));
  return r.received.length - all; // repeats
}

async function killMidDelivery(p: PixgateProcess, r: Receiver) {
  await r.waitFor((x) => x.length >= 10, 60_000);
  p.proc.kill('SIGKILL');
  expect((await p.exited).signal).toBe('SIGKILL');
}

describe('SIGKILL in the middle of deliveries', () => {
  it('embedded database: no event is lost after a restart', async () => {
    const r = await slowReceiver();
    const dataDir = mkdtempSync(join(tmpdir(), 'pixgate-kill-'));
    dirs.push(dataDir);
    // The events are written before the process starts (the data folder has one owner at a time).
    const db = await openPglite({ dataDir });
    await migrate(db);
    await emitAll(db, await merchantWithWebhook(db, `${r.url}/kill`));
    await db.close();

    const env = { DATA_DIR: dataDir, ADMIN_TOKEN, WEBHOOK_ALLOWED_HOSTS: r.hostPort, WEBHOOK_TIMEOUT_MS: '1000' };
    await killMidDelivery(await startPixgate(env), r);
    const delivered = r.received.length;
    expect(delivered).toBeLessThan(SUBJECTS * STEPS);

    const again = await startPixgate(env);
    await r.waitFor((x) => new Set(x.map((y) => y.body.n)).size === SUBJECTS * STEPS, 60_000);
    again.proc.kill('SIGTERM');
    expect((await again.exited).code).toBe(0);
    checkReceived(r);

    const after = await openPglite({ dataDir });
    const rows = await after.query<{ status: string; n: number }>(`SELECT status, count(*)::int AS n FROM webhook_deliveries GROUP BY status`);
    await after.close();
    expect(rows).toEqual([{ status: 'delivered', n: SUBJECTS * STEPS }]);
    await r.close();
  }, 180_000);

  const pgUrl = process.env.TEST_DATABASE_URL;
  it.runIf(pgUrl)('PostgreSQL: no event is lost after a restart; events written while it runs', async () => {
    const r = await slowReceiver();
    const schema = `kill_${Date.now().toString(36)}`;
    const access = await createTestSchema(schema);
    const env = { ...access.env(), ADMIN_TOKEN, WEBHOOK_ALLOWED_HOSTS: r.hostPort, WEBHOOK_TIMEOUT_MS: '1000' };
    const db = await access.open({ max: 4 });
    try {
      const p = await startPixgate(env); // migrates the schema
      await emitAll(db, await merchantWithWebhook(db, `${r.url}/kill`));
      await killMidDelivery(p, r);
      const inFlight = (await db.query<{ n: number }>(`SELECT count(*)::int AS n FROM webhook_deliveries WHERE status = 'pending' AND claim_token IS NOT NULL`))[0]!.n;
      expect(inFlight).toBeGreaterThan(0); // killed with deliveries claimed and not finished

      const again = await startPixgate(env);
      await waitUntil(async () => (await db.query<any>(`SELECT count(*)::int AS n FROM webhook_deliveries WHERE status = 'delivered'`))[0].n === SUBJECTS * STEPS, 60_000);
      again.proc.kill('SIGTERM');
      expect((await again.exited).code).toBe(0);
      checkReceived(r);
      // The killed attempts left a gap in the attempt numbers: their results were never written.
      const lost = (
        await db.query<{ n: number }>(
          `SELECT count(*)::int AS n FROM webhook_deliveries d WHERE d.attempts > (SELECT count(*) FROM webhook_attempts a WHERE a.delivery_id = d.id)`,
        )
      )[0]!.n;
      expect(lost).toBe(inFlight);
    } finally {
      await db.close();
      await access.drop();
      await r.close();
    }
  }, 180_000);
});
