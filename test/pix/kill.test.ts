import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { openPglite } from '../../src/db/pglite.js';
import { ApiClient, type Res } from '../helpers/client.js';
import { createTestSchema, dropTestSchema, schemaAccess } from '../helpers/db.js';
import { validCnpj, validCpf } from '../helpers/fixtures.js';
import { startPixgate, type PixgateProcess } from '../helpers/process.js';

/**
 * SIGKILL while payouts are in flight: after a restart they complete, nothing is debited twice and
 * each event is in the outbox once. Payouts of a settling key and of a fraud-flagged key (queued by
 * protection) are accepted, a second burst is cut off mid-request by the kill and sent again by the
 * client after the restart (same external_id), and the simulator's pending work is only in tables.
 */
const ADMIN_TOKEN = 'kill-test-admin-token-0123';
const SIM = { SIM_SETTLEMENT_MS: '1200', SIM_PROTECTION_MS: '800', SIM_SEED: '99', ADMIN_TOKEN, RATE_LIMIT_PER_MINUTE: '1000000' };

type Query = (text: string, params?: unknown[]) => Promise<any[]>;

interface Variant {
  name: string;
  env(): Promise<Record<string, string>>;
  /** Runs `check` with a connection to the stopped (or running, for PostgreSQL) server's database. */
  inspect(check: (q: Query) => Promise<void>): Promise<void>;
  cleanup(): Promise<void>;
}

const pgUrl = process.env.TEST_DATABASE_URL;
const variants: Variant[] = [];
{
  let dir = '';
  variants.push({
    name: 'embedded database (PGlite)',
    async env() {
      dir = mkdtempSync(join(tmpdir(), 'pixgate-kill-'));
      return { DATA_DIR: dir };
    },
    async inspect(check) {
      const db = await openPglite({ dataDir: dir });
      try {
        await check((text, params) => db.query(text, params));
      } finally {
        await db.close();
      }
    },
    async cleanup() {
      if (dir) rmSync(dir, { recursive: true, force: true });
    },
  });
}
if (pgUrl) {
  const schema = `kill_${Date.now().toString(36)}`;
  variants.push({
    name: 'PostgreSQL',
    async env() {
      return (await createTestSchema(schema)).env();
    },
    async inspect(check) {
      const c = schemaAccess(schema).client();
      await c.connect();
      try {
        await check(async (text, params) => (await c.query(text, params as unknown[])).rows);
      } finally {
        await c.end();
      }
    },
    async cleanup() {
      await dropTestSchema(schema);
    },
  });
}

async function call(url: string, prefix: 'admin' | 'sandbox', method: string, path: string, body?: unknown) {
  const res = await fetch(`${url}/api/${prefix}${path}`, {
    method,
    headers: { authorization: `Bearer ${ADMIN_TOKEN}`, ...(body ? { 'content-type': 'application/json' } : {}) },
    ...(body ? { body: JSON.stringify(body) } : {}),
  });
  return { status: res.status, body: (await res.json()) as any };
}

describe.each(variants)('SIGKILL with payouts in flight, $name', (variant) => {
  afterAll(() => variant.cleanup());

  it('after restart every payout completes once, debited once, each event in the outbox once', async () => {
    const env = { ...SIM, ...(await variant.env()) };
    let p: PixgateProcess = await startPixgate(env);
    const m = await call(p.url!, 'admin', 'POST', '/merchants', { name: 'Kill Payouts', document: validCnpj() });
    await call(p.url!, 'admin', 'POST', `/accounts/${m.body.account_id}/deposits`, { amount: 1_000_000 });
    await call(p.url!, 'admin', 'PATCH', `/accounts/${m.body.account_id}`, { cash_out_fee_cents: 7 });
    const k = await call(p.url!, 'admin', 'POST', '/api-keys', { merchant_id: m.body.merchant_id, permissions: ['transfer:write', 'transfer:read'], ip_whitelist: ['127.0.0.1', '::1'] });
    const keys = { settle: 'kill-settle@example.com', queued: 'kill-queued@example.com' };
    for (const [behaviorKey, key] of Object.entries(keys)) {
      const r = await call(p.url!, 'sandbox', 'POST', '/dict/keys', { key, type: 'email', name: 'Recebedor', document: validCpf(), ispb: '60746948', fraud_flagged: behaviorKey === 'queued' });
      expect(r.status).toBe(201);
    }
    const client = (url: string) => new ApiClient(url, k.body.client_id, k.body.client_secret);
    const order = (i: number) => ({ amount: 100 + i, pix_key: i % 4 === 0 ? keys.queued : keys.settle, external_id: `kill-${i}` });

    // 30 answered before the kill (all in flight: settlement takes 1.2 s), 20 cut off by it.
    const answered = await Promise.all(Array.from({ length: 30 }, (_, i) => client(p.url!).post('/pix/cash-out', order(i))));
    expect(answered.every((r) => r.status === 200 || r.status === 202)).toBe(true);
    // The kill lands as soon as the first of the second burst is answered: the others are then
    // somewhere between arriving, reserving, the rail call and recording its answer.
    let firstAnswer!: () => void;
    const oneAnswered = new Promise<void>((resolve) => (firstAnswer = resolve));
    const cutOff = Array.from({ length: 20 }, (_, i) =>
      client(p.url!)
        .post('/pix/cash-out', order(30 + i))
        .then((r) => (firstAnswer(), r))
        .catch(() => null),
    );
    await Promise.race([oneAnswered, new Promise((r) => setTimeout(r, 3000))]);
    p.proc.kill('SIGKILL');
    expect((await p.exited).signal).toBe('SIGKILL');
    await Promise.all(cutOff);

    p = await startPixgate(env);
    // The client sends again whatever it has no answer for (or every order: a repeat is harmless).
    const resent: Res[] = await Promise.all(Array.from({ length: 50 }, (_, i) => client(p.url!).post('/pix/cash-out', order(i))));
    expect(resent.map((r) => r.status).every((s) => s === 200 || s === 202)).toBe(true);
    for (const [i, r] of answered.entries()) expect(resent[i]!.body.transaction_id).toBe(r.body.transaction_id);

    const deadline = Date.now() + 60_000;
    for (;;) {
      const inFlight = await client(p.url!).get('/transactions?status=processing&per_page=100');
      if (inFlight.body.data.length === 0) break;
      if (Date.now() > deadline) throw new Error(`still in flight: ${JSON.stringify(inFlight.body.data.map((d: any) => d.transaction_id))}`);
      await new Promise((r) => setTimeout(r, 200));
    }
    const account = await call(p.url!, 'admin', 'GET', `/accounts/${m.body.account_id}`);
    const debited = Array.from({ length: 50 }, (_, i) => (100 + i + 7) * 100).reduce((a, b) => a + b, 0);
    expect(account.body.balances).toMatchObject({ available: 100_000_000 - debited, pending: 0 });
    // The PostgreSQL server's tables are inspected while it runs; the embedded one after a clean stop.
    p.proc.kill('SIGTERM');
    expect((await p.exited).code).toBe(0);

    await variant.inspect(async (q) => {
      const rows = await q(`SELECT transaction_id, external_id, payment_status FROM transactions WHERE account_id = $1 AND kind = 'cash_out'`, [m.body.account_id]);
      expect(rows).toHaveLength(50);
      expect(new Set(rows.map((r) => r.external_id)).size).toBe(50);
      expect(rows.every((r) => r.payment_status === 'settled')).toBe(true);
      const ledger = await q(
        `SELECT lt.kind, count(*)::int AS n, count(DISTINCT lt.reference)::int AS refs FROM ledger_transactions lt
          WHERE lt.reference = ANY($1::text[]) GROUP BY lt.kind ORDER BY lt.kind`,
        [rows.map((r) => r.transaction_id)],
      );
      expect(ledger).toEqual([
        { kind: 'cash_out_reserve', n: 50, refs: 50 },
        { kind: 'cash_out_settle', n: 50, refs: 50 },
      ]);
      const events = await q(`SELECT subject, event, count(*)::int AS n FROM outbox_events WHERE account_id = $1 GROUP BY subject, event`, [m.body.account_id]);
      expect(events.every((e) => e.n === 1)).toBe(true);
      for (const [i, r] of rows.entries()) {
        const mine = events.filter((e) => e.subject === r.transaction_id).map((e) => e.event).sort();
        const queued = Number(String(r.external_id).slice(5)) % 4 === 0;
        expect(mine, `${i} ${r.external_id}`).toEqual(
          queued ? ['pix.payout.confirmed', 'pix.payout.processing', 'pix.payout.queued'] : ['pix.payout.confirmed', 'pix.payout.processing'],
        );
      }
      const drift = await q(
        `SELECT la.code FROM ledger_accounts la LEFT JOIN ledger_entries e ON e.ledger_account_id = la.id
          WHERE la.tracks_balance GROUP BY la.id HAVING la.balance <> COALESCE(sum(e.amount), 0)`,
      );
      expect(drift).toEqual([]);
      const [{ total }] = await q('SELECT COALESCE(sum(balance), 0)::bigint AS total FROM ledger_balances');
      expect(Number(total)).toBe(0);
    });
  }, 180_000);
});
