import { execFile } from 'node:child_process';
import { createHash, createHmac } from 'node:crypto';
import { promisify } from 'node:util';
import { Webhook } from 'standardwebhooks';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { signV1, signV2 } from '../../src/auth/hmac.js';
import { runCli } from '../../src/cli/main.js';
import { SCENARIOS } from '../../src/cli/trigger.js';
import type { CliIo } from '../../src/cli/io.js';
import { canonicalize } from '../../src/lib/canonicalJson.js';
import { merchantWithKey, type MerchantFixture } from '../helpers/client.js';
import { SIM_FAST } from '../helpers/pix.js';
import { startTestServer, TEST_ADMIN_TOKEN, type TestServer } from '../helpers/server.js';
import { startReceiver, waitUntil, type Receiver } from '../webhooks/helpers.js';

const exec = promisify(execFile);

/** Runs the CLI in-process and collects its output. */
async function cli(argv: string[], env: Record<string, string> = {}, signal = new AbortController().signal, isTTY = false) {
  let stdout = '';
  let stderr = '';
  const io: CliIo = { stdout: (t) => void (stdout += t), stderr: (t) => void (stderr += t), env: { HOME: '/nonexistent', DATA_DIR: '/nonexistent', ...env }, isTTY, cwd: process.cwd(), signal };
  const code = await runCli(argv, io);
  return { code, stdout, stderr };
}

describe('pixgate CLI against a real server', () => {
  let s: TestServer;
  let m: MerchantFixture;
  let env: Record<string, string>;
  let r: Receiver;
  beforeAll(async () => {
    r = await startReceiver();
    s = await startTestServer({ env: { ...SIM_FAST, WEBHOOK_ALLOWED_HOSTS: r.hostPort } });
    m = await merchantWithKey(s, { depositCents: 1_000_000 });
    env = { PIXGATE_URL: s.url, PIXGATE_CLIENT_ID: m.client.clientId, PIXGATE_CLIENT_SECRET: m.client.clientSecret, PIXGATE_ADMIN_TOKEN: TEST_ADMIN_TOKEN };
  });
  afterAll(async () => {
    await s?.close();
    await r?.close();
  });

  it('help, usage errors and missing credentials: exit codes 0 and 2', async () => {
    const help = await cli(['help']);
    expect(help.code).toBe(0);
    for (const name of Object.keys(SCENARIOS)) expect(help.stdout).toContain(name);
    expect((await cli(['frobnicate'])).code).toBe(2);
    const noKey = await cli(['api', 'GET', '/balance']);
    expect(noKey.code).toBe(2);
    expect(noKey.stderr).toMatch(/no API key/);
    expect((await cli(['listen'], env)).code).toBe(2);
    expect((await cli(['trigger', 'nope'], env)).code).toBe(2);
  });

  it('sign prints the headers the server verifies; --explain the canonical string and its SHA-256', async () => {
    const body = '{ "b": 1, "a": "é" }';
    const v1 = await cli(['sign', '-d', body, '--v1', '--explain'], env);
    expect(v1.code).toBe(0);
    const canonical = canonicalize(body);
    expect(v1.stdout).toContain(`hmac: ${signV1(m.client.clientSecret, canonical)}`);
    expect(v1.stdout).toContain(canonical);
    expect(v1.stdout).toContain(createHash('sha256').update(canonical).digest('hex'));
    const v2 = JSON.parse((await cli(['sign', '-d', body, '--path', '/pix/cash-out', '--timestamp', '1700000000', '--nonce', 'abcdefghijklmnop', '--idempotency-key', 'key-12345678', '--json'], env)).stdout);
    expect(v2.headers.hmac).toBe(signV2(m.client.clientSecret, { timestamp: '1700000000', nonce: 'abcdefghijklmnop', method: 'POST', path: '/api/external/pix/cash-out', idempotencyKey: 'key-12345678', canonicalBody: canonical }));
    expect(v2.signed_string_sha256).toBe(createHash('sha256').update(v2.signed_string).digest('hex'));
  });

  it('api: a signed POST (v2 and v1) prints status, headers and body; errors exit 1; an unreachable server exits 3', async () => {
    const ok = await cli(['api', 'POST', '/cpf/validate', '-d', '{"cpf":"52998224725"}'], env);
    expect(ok.code).toBe(0);
    expect(ok.stdout).toMatch(/^HTTP 200\n/);
    expect(ok.stdout).toMatch(/x-request-id: \S+/);
    expect(ok.stdout).not.toContain('\u001b['); // no colour off a terminal
    const v1 = JSON.parse((await cli(['api', 'POST', '/api/external/cpf/validate', '-d', '{"cpf":"52998224725"}', '--v1', '--json'], env)).stdout);
    expect(v1).toMatchObject({ status: 200, body: { valid: true } });
    const tty = await cli(['api', 'GET', '/balance'], env, undefined, true);
    expect(tty.stdout).toContain('\u001b[32m');
    const bad = await cli(['api', 'POST', '/pix/cash-out', '-d', '{"amount":0,"pix_key":"x@example.com"}', '--json'], env);
    expect(bad.code).toBe(1);
    expect(JSON.parse(bad.stdout).status).toBeGreaterThanOrEqual(400);
    expect((await cli(['api', 'GET', '/balance'], { ...env, PIXGATE_URL: 'http://127.0.0.1:1' })).code).toBe(3);
  });

  it('listen forwards triggered events to a local URL signed as real deliveries, one line each with the answer', async () => {
    const ctl = new AbortController();
    const secret = `whsec_${Buffer.alloc(32, 3).toString('base64')}`;
    let out = '';
    const io: CliIo = { stdout: (t) => void (out += t), stderr: (t) => void (out += t), env: { ...env, HOME: '/nonexistent', DATA_DIR: '/nonexistent' }, isTTY: false, cwd: process.cwd(), signal: ctl.signal };
    const listening = runCli(['listen', '--forward-to', `${r.url}/local`, '--events', 'pix.payout.confirmed,pix.charge.paid', '--webhook-secret', secret], io);
    await waitUntil(() => out.includes('Ready.'), 10_000, 'listen to connect');
    const t = await cli(['trigger', 'payout.confirmed', '--json'], env);
    expect(t.code).toBe(0);
    const txId = JSON.parse(t.stdout).transaction_id;
    await cli(['trigger', 'pix.inbound'], env);
    await r.waitFor((x) => x.some((y) => y.body.transaction_id === txId) && x.some((y) => y.body.event === 'pix.charge.paid'));
    for (const d of r.received.filter((y) => y.path === '/local')) {
      expect(['pix.payout.confirmed', 'pix.charge.paid']).toContain(d.body.event);
      expect(d.headers['x-service-signature']).toBe(createHmac('sha256', secret).update(d.raw).digest('hex'));
      const h = Object.fromEntries(Object.entries(d.headers).map(([k, v]) => [k, String(v)]));
      expect((new Webhook(secret).verify(d.raw.toString('utf8'), h) as { event: string }).event).toBe(d.body.event);
    }
    await waitUntil(() => /pix\.charge\.paid\s+\[200\]/.test(out), 5_000, 'the output line');
    expect(out).toMatch(/pix\.payout\.confirmed\s+\[200\] POST http:\/\/127\.0\.0\.1:\d+\/local/);
    ctl.abort();
    expect(await listening).toBe(0);
  });

  it('trigger produces each scenario’s events (as the events feed shows)', async () => {
    const hook = await m.client.post('/webhooks', { url: `${r.url}/trigger`, events: ['webhook.test'], allow_insecure: true });
    expect(hook.status).toBe(201);
    for (const [name, scenario] of Object.entries(SCENARIOS)) {
      const start = (await s.ctx.db.query<{ start: number }>('SELECT coalesce(max(id), 0)::bigint AS start FROM outbox_events'))[0]!.start;
      const t = await cli(['trigger', name, '--json'], env);
      expect(t.code, `${name}: ${t.stderr}`).toBe(0);
      const wanted = scenario.events; // charge.expired too: it advances the sandbox clock
      await waitUntil(
        async () => {
          const seen = (await m.client.get(`/events?limit=500&after=${start}`)).body.events.map((e: { event: string }) => e.event);
          return wanted.every((e) => seen.includes(e));
        },
        15_000,
        `events of ${name}`,
      );
    }
    await m.client.delete(`/webhooks/${hook.body.id}`);
  });

  it('the bin runs as a process: --json output, exit code', async () => {
    const run = await exec(process.execPath, ['--import', 'tsx', 'src/cli/main.ts', 'api', 'GET', '/balance', '--json'], { env: { ...process.env, ...env } });
    expect(JSON.parse(run.stdout)).toMatchObject({ status: 200, body: { worked: true } });
    const failed = await exec(process.execPath, ['--import', 'tsx', 'src/cli/main.ts', 'nope'], { env: { ...process.env, ...env } }).catch((e) => e);
    expect(failed.code).toBe(2);
  });
});
