import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { createTestSchema } from './helpers/db.js';
import { afterAll, describe, expect, it } from 'vitest';
import { spawnPixgate, startPixgate } from './helpers/process.js';

const ADMIN_TOKEN = 'process-test-admin-token';
const dirs: string[] = [];
function tempDir() {
  const d = mkdtempSync(join(tmpdir(), 'pixgate-proc-'));
  dirs.push(d);
  return d;
}
afterAll(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

async function admin(url: string, method: string, path: string, body?: unknown) {
  const res = await fetch(`${url}/api/admin${path}`, {
    method,
    headers: { authorization: `Bearer ${ADMIN_TOKEN}`, ...(body ? { 'content-type': 'application/json' } : {}) },
    ...(body ? { body: JSON.stringify(body) } : {}),
  });
  return { status: res.status, body: (await res.json()) as any };
}

describe('the pixgate process (embedded database)', () => {
  it('first start seeds and prints demo credentials; a second start keeps the data and does not seed again', async () => {
    const dataDir = tempDir();
    const first = await startPixgate({ DATA_DIR: dataDir });
    const out = first.output();
    expect(out).toMatch(/ADMIN_TOKEN \(generated, kept in \S+local-credentials\.json; set ADMIN_TOKEN to choose one\): adm_/);
    expect(out).toMatch(/Demo merchant seeded \(kept in \S+local-credentials\.json\):/);
    const clientId = out.match(/client_id\s+(cli_\w+)/)![1]!;
    const secret = out.match(/client_secret\s+(sk_[\w-]+)/)![1]!;
    // The secret is printed once, for the operator, but never written to the structured log lines.
    const logLines = out.split('\n').filter((l) => l.startsWith('{'));
    expect(logLines.join('\n')).not.toContain(secret);
    expect((await fetch(`${first.url}/healthz`)).status).toBe(200);
    const ready = await fetch(`${first.url}/readyz`);
    expect(ready.status).toBe(200);
    expect(await ready.json()).toEqual({ status: 'ready', checks: { database: 'ok', redis: 'not configured' } });
    first.proc.kill('SIGTERM');
    expect(await first.exited).toEqual({ code: 0, signal: null });

    const second = await startPixgate({ DATA_DIR: dataDir, ADMIN_TOKEN });
    expect(second.output()).not.toContain('Demo merchant seeded');
    const account = await admin(second.url!, 'GET', '/accounts/1');
    expect(account.body).toMatchObject({ account_id: 1, balance: 100_000_000 });
    const keys = await admin(second.url!, 'PATCH', `/api-keys/${clientId}`, { permissions: ['account:read'] });
    expect(keys.status).toBe(200);
    second.proc.kill('SIGINT');
    expect((await second.exited).code).toBe(0);
  });

  it('loses no acknowledged transaction when killed with SIGKILL', async () => {
    const dataDir = tempDir();
    const env = { DATA_DIR: dataDir, ADMIN_TOKEN };
    const p = await startPixgate(env);
    const m = await admin(p.url!, 'POST', '/merchants', { name: 'Kill Test', document: '11444777000161' });
    let acknowledged = 0;
    for (let i = 1; i <= 40; i++) {
      const res = await admin(p.url!, 'POST', `/accounts/${m.body.account_id}/deposits`, { amount: i });
      if (res.status === 201) acknowledged += i * 100;
    }
    p.proc.kill('SIGKILL');
    expect((await p.exited).signal).toBe('SIGKILL');

    const again = await startPixgate(env); // the stale lock of the killed process is taken over
    const account = await admin(again.url!, 'GET', `/accounts/${m.body.account_id}`);
    expect(account.body.balance).toBe(acknowledged);
    again.proc.kill('SIGTERM');
    await again.exited;
  });

  it('refuses to open a data folder another live process holds', async () => {
    const dataDir = tempDir();
    const p = await startPixgate({ DATA_DIR: dataDir, ADMIN_TOKEN });
    const second = spawnPixgate({ DATA_DIR: dataDir, ADMIN_TOKEN });
    const { code } = await second.exited;
    expect(code).toBe(1);
    expect(second.output()).toMatch(/pixgate: failed to start: the data folder .* is in use by process \d+/);
    p.proc.kill('SIGTERM');
    await p.exited;
  });

  it.each([
    [{ PORT: 'abc' }, 'pixgate: configuration error: PORT must be a whole number, got "abc"'],
    [{ WEB_CONCURRENCY: '2' }, 'pixgate: configuration error: WEB_CONCURRENCY above 1 requires DATABASE_URL and REDIS_URL (or REDIS_SENTINELS)'],
    [{ APP_ENV: 'production', ADMIN_TOKEN }, 'pixgate: configuration error: APP_ENV=production requires DATABASE_URL'],
    [{ APP_ENV: 'production', ADMIN_TOKEN, DATABASE_URL: 'postgres://127.0.0.1:1/none' }, 'pixgate: configuration error: APP_ENV=production requires REDIS_URL or REDIS_SENTINELS (shared replay protection)'],
  ])('stops at start with one clear line for %j', async (env, line) => {
    const p = spawnPixgate({ DATA_DIR: tempDir(), ...env });
    const { code } = await p.exited;
    expect(code).toBe(78);
    expect(p.output().trim()).toBe(line);
  });
});

const pgUrl = process.env.TEST_DATABASE_URL;
const redisUrl = process.env.TEST_REDIS_URL;
describe.runIf(pgUrl && redisUrl)('the pixgate process on PostgreSQL and Redis', () => {
  it('serves with WEB_CONCURRENCY=2 and readyz checks both', async () => {
    // A schema of its own, through the connection string's startup options.
    const schema = `proc_${Date.now().toString(36)}`;
    const c = new pg.Client({ connectionString: pgUrl });
    await c.connect();
    const access = await createTestSchema(schema);
    const p = await startPixgate({ ...access.env(), REDIS_URL: redisUrl!, WEB_CONCURRENCY: '2', ADMIN_TOKEN });
    await p.waitFor(/pixgate listening[\s\S]*pixgate listening/);
    const pids = new Set([...p.output().matchAll(/"pid":(\d+)[^\n]*pixgate listening/g)].map((m) => m[1]));
    expect(pids.size).toBe(2);
    const ready = await fetch(`${p.url}/readyz`);
    expect(await ready.json()).toEqual({ status: 'ready', checks: { database: 'ok', redis: 'ok' } });
    const [{ n }] = (await c.query(`SELECT count(*)::int AS n FROM ${schema}.schema_migrations`)).rows;
    expect(n).toBeGreaterThan(0);
    // Local mode seeds the demo merchant once: the workers do not race to seed it (one used to die
    // on the second registration of the demo PIX key and be restarted).
    const [{ merchants }] = (await c.query(`SELECT count(*)::int AS merchants FROM ${schema}.merchants`)).rows;
    expect(merchants).toBe(1);
    expect(p.output()).not.toMatch(/failed to start|worker died/);
    p.proc.kill('SIGTERM');
    expect((await p.exited).code).toBe(0);
    await access.drop();
    await c.end();
  });
});

describe('lifecycle and logs', () => {
  it('SIGTERM finishes an in-flight request before exiting, and stops accepting new ones', async () => {
    const p = await startPixgate({ DATA_DIR: tempDir(), ADMIN_TOKEN });
    const { port } = new URL(p.url!);
    const net = await import('node:net');
    const body = JSON.stringify({ name: 'Slow Request', document: '11444777000161' });
    const socket = net.connect(Number(port), '127.0.0.1');
    await new Promise((r) => socket.once('connect', r));
    let response = '';
    socket.on('data', (c) => (response += c.toString()));
    socket.write(
      `POST /api/admin/merchants HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${ADMIN_TOKEN}\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n` +
        body.slice(0, 10),
    );
    await new Promise((r) => setTimeout(r, 200));
    p.proc.kill('SIGTERM');
    await p.waitFor(/shutting down/);
    // A new connection is refused while the in-flight request is still open.
    const refused = await fetch(`${p.url}/healthz`).then(
      (r) => r.status,
      () => 'refused',
    );
    expect(refused === 'refused' || refused === 503).toBe(true);
    socket.write(body.slice(10));
    await new Promise((r) => socket.once('close', r));
    expect(response).toMatch(/^HTTP\/1\.1 201/);
    expect(await p.exited).toEqual({ code: 0, signal: null });
  });

  it('never writes credentials to the log', async () => {
    const p = await startPixgate({ DATA_DIR: tempDir(), ADMIN_TOKEN, LOG_LEVEL: 'trace' });
    const out0 = p.output();
    const clientId = out0.match(/client_id\s+(cli_\w+)/)![1]!;
    const secret = out0.match(/client_secret\s+(sk_[\w-]+)/)![1]!;
    await fetch(`${p.url}/api/external/cpf/validate`, {
      method: 'POST',
      headers: { authorization: `ApiKey ${clientId}:${secret}`, hmac: 'deadbeef'.repeat(16), 'content-type': 'application/json', 'x-api-key': 'ck_secretcentralkey' },
      body: '{"cpf":"52998224725"}',
    });
    await fetch(`${p.url}/api/admin/accounts/1`, { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } });
    p.proc.kill('SIGTERM');
    await p.exited;
    const logLines = p.output().split('\n').filter((l) => l.startsWith('{')).join('\n');
    expect(logLines).toContain('request completed');
    for (const secretText of [secret, ADMIN_TOKEN, 'deadbeef'.repeat(16), 'ck_secretcentralkey']) {
      expect(logLines).not.toContain(secretText);
    }
  });
});
