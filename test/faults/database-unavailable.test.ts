import { SERVICE_UNAVAILABLE_MESSAGE } from '../../src/http/errors.js';
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AppContext } from '../../src/context.js';
import { recordAnswer } from '../../src/external/pipeline.js';
import { openPostgres } from '../../src/db/postgres.js';
import { merchantWithKey, type MerchantFixture } from '../helpers/client.js';
import { openTestDatabase, type TestDatabase } from '../helpers/db.js';
import { startTestServer, TEST_ADMIN_TOKEN, type TestServer } from '../helpers/server.js';
import { startTcpProxy, type TcpProxy } from '../helpers/tcpProxy.js';

/**
 * Issue 24, item 15: PostgreSQL unavailable while requests run. pixgate talks to the shared
 * PostgreSQL through a TCP proxy that drops every connection and refuses new ones (a stopped
 * database), or has its backends terminated from another connection; the shared PostgreSQL itself
 * is never stopped. Every API answers 503 with Retry-After in its own shape and no driver detail,
 * an Idempotency-Key is free again for the retry, and nothing ends the process.
 */
const url = process.env.TEST_DATABASE_URL;

/** Released by the test: the gated route waits for it before it touches the database. */
let gate: { open(): void; wait: Promise<void> } = newGate();
function newGate() {
  let open!: () => void;
  const wait = new Promise<void>((resolve) => (open = resolve));
  return { open, wait };
}

/** POST /test/gated-write: waits for the gate, then writes one row and records its answer. */
async function gatedRoute(app: FastifyInstance, ctx: AppContext) {
  await ctx.db.exec('CREATE TABLE IF NOT EXISTS fault_test_writes (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, body jsonb NOT NULL)');
  app.post('/test/gated-write', { config: { permission: 'transfer:write' } }, async (req, reply) => {
    await gate.wait;
    const payload = await ctx.db.transaction(async (tx) => {
      const [row] = await tx.query<{ id: number }>('INSERT INTO fault_test_writes (body) VALUES ($1::jsonb) RETURNING id', [JSON.stringify(req.body)]);
      const answer = { worked: true, write_id: row!.id };
      await recordAnswer(req, tx, 201, answer);
      return answer;
    });
    return reply.code(201).send(payload);
  });
  // Answers without touching the database: its Idempotency-Key answer is stored after it (onSend).
  app.post('/test/gated-echo', { config: { permission: 'account:read' } }, async () => {
    await gate.wait;
    return { worked: true };
  });
}

const LEAKS = ['ECONNREFUSED', 'ECONNRESET', '127.0.0.1', 'terminat', 'connect', '57P01', 'postgres'];

function expectNoInternals(text: string, proxyPort: number) {
  for (const leak of [...LEAKS, String(proxyPort)]) expect(text).not.toContain(leak);
}

describe.skipIf(!url)('PostgreSQL unavailable during requests (through a TCP proxy)', () => {
  let direct: TestDatabase;
  let proxy: TcpProxy;
  let server: TestServer;
  let merchant: MerchantFixture;
  let centralKey: string;
  const appName = `pixgate-fault-${randomBytes(4).toString('hex')}`;

  beforeAll(async () => {
    direct = await openTestDatabase('postgres');
    const [{ schema }] = (await direct.db.query<{ schema: string }>('SELECT current_schema() AS schema')) as [{ schema: string }];
    const target = new URL(url!);
    proxy = await startTcpProxy(target.hostname, Number(target.port || 5432));
    const proxied = new URL(url!);
    proxied.hostname = '127.0.0.1';
    proxied.port = String(proxy.port);
    // A short statement_timeout: a statement on a connection that stopped answering gives up after it (and a margin).
    const db = await openPostgres({ url: proxied.toString(), schema, max: 10, applicationName: appName, statementTimeoutMs: 1_000 });
    server = await startTestServer({
      database: { db, backend: 'postgres', close: () => db.close(), reopen: () => Promise.reject(new Error('not here')) },
      externalPlugins: [gatedRoute],
      env: { AUTH_CACHE_TTL_MS: '60000' },
    });
    merchant = await merchantWithKey(server, { depositCents: 100_000 });
    centralKey = (await server.admin('POST', '/central-keys', { name: 'ERP', account_id: merchant.accountId })).body.api_key;
    // Read once while the database answers: the pipeline then knows the key (AUTH_CACHE_TTL_MS).
    expect((await merchant.client.get('/balance')).status).toBe(200);
  });

  afterAll(async () => {
    await proxy?.setMode('forward');
    await server?.close();
    await proxy?.close();
    await direct?.close();
  });

  it('answers 503 with Retry-After in each API’s own shape, without the driver’s error', async () => {
    await proxy.setMode('refuse');
    try {
      const central = (path: string) => fetch(`${server.url}/api/v1/central${path}`, { headers: { 'x-api-key': centralKey } });
      const answers: Array<[string, Response]> = [
        ['external GET', await fetch(`${server.url}/api/external/transactions`, { headers: { authorization: merchant.client.authHeader() } })],
        ['admin GET', await fetch(`${server.url}/api/admin/accounts/${merchant.accountId}`, { headers: { authorization: `Bearer ${TEST_ADMIN_TOKEN}` } })],
        [
          'admin POST',
          await fetch(`${server.url}/api/admin/accounts/${merchant.accountId}/deposits`, {
            method: 'POST',
            headers: { authorization: `Bearer ${TEST_ADMIN_TOKEN}`, 'content-type': 'application/json' },
            body: JSON.stringify({ amount: 100 }),
          }),
        ],
        [
          'sandbox POST',
          await fetch(`${server.url}/api/sandbox/pix/inbound`, {
            method: 'POST',
            headers: { authorization: `Bearer ${TEST_ADMIN_TOKEN}`, 'content-type': 'application/json' },
            body: JSON.stringify({ account_id: merchant.accountId, amount: 500, payer_name: 'Carlos' }),
          }),
        ],
        ['central GET', await central('/boletos')],
      ];
      const external = await merchant.client.post('/pix/cash-out', { amount: 100, pix_key: 'maria@example.com', pix_key_type: 'email' }, { idempotencyKey: 'fault-cash-out-1' });
      for (const [what, res] of answers) {
        const text = await res.text();
        expect({ what, status: res.status }).toEqual({ what, status: 503 });
        expect(Number(res.headers.get('retry-after'))).toBeGreaterThan(0);
        expectNoInternals(text, proxy.port);
        const body = JSON.parse(text);
        if (what.startsWith('central')) {
          expect(body).toMatchObject({ success: false, error: { code: 'SERVICE_UNAVAILABLE' } });
        } else {
          // One 503 body past the pipeline (src/http/errors.ts serviceUnavailable): the cash-out
          // error body, a superset of the business shape.
          expect(body).toEqual({ worked: false, errors: { service_unavailable: SERVICE_UNAVAILABLE_MESSAGE }, code: 'service_unavailable', detail: SERVICE_UNAVAILABLE_MESSAGE });
        }
      }
      expect(external.status).toBe(503);
      expect(Number(external.headers.get('retry-after'))).toBeGreaterThan(0);
      expectNoInternals(external.text, proxy.port);
      expect(external.body).toEqual({ worked: false, errors: { service_unavailable: SERVICE_UNAVAILABLE_MESSAGE }, code: 'service_unavailable', detail: SERVICE_UNAVAILABLE_MESSAGE });
      const ready = await fetch(`${server.url}/readyz`);
      expect(ready.status).toBe(503);
    } finally {
      await proxy.setMode('forward');
    }
    // And everything works again once the database is back.
    expect((await merchant.client.get('/transactions')).status).toBe(200);
  });

  it('answers 503 when the database stops answering without closing its connections (a partition without RST)', async () => {
    // Connections in the pool, idle, before the partition.
    expect((await server.admin('GET', `/accounts/${merchant.accountId}`)).status).toBe(200);
    await proxy.setMode('blackhole');
    try {
      const res = await fetch(`${server.url}/api/admin/accounts/${merchant.accountId}`, { headers: { authorization: `Bearer ${TEST_ADMIN_TOKEN}` } });
      expect(res.status).toBe(503);
      expect(Number(res.headers.get('retry-after'))).toBeGreaterThan(0);
      expectNoInternals(await res.text(), proxy.port);
    } finally {
      await proxy.setMode('forward');
    }
    await waitFor(async () => (await server.admin('GET', `/accounts/${merchant.accountId}`)).status === 200, 30_000);
  });

  it('frees the Idempotency-Key of a request answered 503, even when the database was down at its answer', async () => {
    gate = newGate();
    const key = `fault-${randomBytes(6).toString('hex')}`;
    const first = merchant.client.post('/test/gated-write', { n: 1 }, { idempotencyKey: key });
    // The claim is taken while the database answers; then the database goes away and the handler runs.
    await waitFor(async () => (await direct.db.query(`SELECT 1 FROM idempotency_keys WHERE key = $1`, [key])).length === 1);
    await proxy.setMode('refuse');
    gate.open();
    const answer = await first;
    expect(answer.status).toBe(503);
    await proxy.setMode('forward');
    // The retry takes the key at once (no 409 "still being processed", no wait for the lease).
    const retry = await merchant.client.post('/test/gated-write', { n: 1 }, { idempotencyKey: key });
    expect(retry.status).toBe(201);
    expect(retry.body.write_id).toBeGreaterThan(0);
  });

  it('keeps a 2xx answer whose Idempotency-Key answer cannot be stored (the database went away meanwhile)', async () => {
    gate = newGate();
    const key = `fault-${randomBytes(6).toString('hex')}`;
    const first = merchant.client.post('/test/gated-echo', { n: 1 }, { idempotencyKey: key });
    await waitFor(async () => (await direct.db.query(`SELECT 1 FROM idempotency_keys WHERE key = $1`, [key])).length === 1);
    await proxy.setMode('refuse');
    try {
      gate.open();
      const answer = await first;
      expect(answer.status).toBe(200);
      expect(answer.body).toEqual({ worked: true });
    } finally {
      await proxy.setMode('forward');
    }
  });

  it('survives backends terminated in the middle of operator deposits: every answer is 201 or 503', async () => {
    const killer = new pg.Client({ connectionString: url });
    await killer.connect();
    try {
      let stop = false;
      const kills = (async () => {
        while (!stop) {
          await killer.query(`SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name LIKE $1 AND pid <> pg_backend_pid()`, [`${appName}%`]);
          await new Promise((r) => setTimeout(r, 15));
        }
      })();
      const statuses = await Promise.all(
        Array.from({ length: 60 }, async (_, i) => {
          await new Promise((r) => setTimeout(r, i * 5));
          const res = await server.admin('POST', `/accounts/${merchant.accountId}/deposits`, { amount: 100 });
          if (res.status === 503) expectNoInternals(JSON.stringify(res.body), proxy.port);
          return res.status;
        }),
      );
      stop = true;
      await kills;
      expect(statuses.filter((s) => s !== 201 && s !== 503)).toEqual([]);
    } finally {
      await killer.end();
    }
    // The process and its pool carry on.
    await waitFor(async () => (await server.admin('GET', `/accounts/${merchant.accountId}`)).status === 200);
  });
});

async function waitFor(check: () => Promise<boolean>, timeoutMs = 10_000) {
  const start = performance.now();
  for (;;) {
    try {
      if (await check()) return;
    } catch {
      // not yet
    }
    if (performance.now() - start > timeoutMs) throw new Error('condition not met in time');
    await new Promise((r) => setTimeout(r, 50));
  }
}
