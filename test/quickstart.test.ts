/**
 * Issue 28: the README's quick start, command by command as written there, on a fresh local server
 * (APP_ENV=local, its own data folder, the credentials the CLI reads from it): `listen` forwards
 * signed events to a receiver that verifies them with the SDK, `trigger payout.confirmed` and the
 * cash-out to maria@example.com succeed (the demo seed registers that key), and both payouts'
 * `pix.payout.confirmed` arrive verified. Only the receiver's port differs from the README's
 * (3000 may be taken on the test machine). A key nobody registered answers the spec's
 * `destination_not_found` with a detail that says how to register it in the sandbox (local mode
 * only; elsewhere the detail names the key).
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { verifyWebhook } from '@pixgate/sdk';
import { runCli } from '../src/cli/main.js';
import type { CliIo } from '../src/cli/io.js';
import { parseConfig } from '../src/config.js';
import { packageRoot } from '../src/lib/paths.js';
import { startServer, type RunningServer } from '../src/server.js';
import { merchantWithKey } from './helpers/client.js';
import { startTestServer } from './helpers/server.js';

/** The `npm run pixgate -- …` lines of the README's quick start, as argument lists (single quotes as the shell reads them). */
function quickStartCommands(): string[][] {
  const readme = readFileSync(join(packageRoot, 'README.md'), 'utf8');
  const section = readme.slice(readme.indexOf('## Quick start'), readme.indexOf('\n## ', readme.indexOf('## Quick start') + 5));
  return [...section.matchAll(/^\s*npm run pixgate -- (.+?)(?:\s+#.*)?$/gm)].map((m) => [...m[1]!.matchAll(/'([^']*)'|(\S+)/g)].map((a) => a[1] ?? a[2]!));
}

const dataDir = mkdtempSync(join(tmpdir(), 'pixgate-quickstart-'));
let server: RunningServer;
let receiver: Server;
let receiverUrl: string;
let secret: string | undefined;
const verified: { event: string; transaction_id: string | undefined }[] = [];
const refused: string[] = [];

function io(signal = new AbortController().signal) {
  let out = '';
  let err = '';
  const cli: CliIo = { stdout: (t) => void (out += t), stderr: (t) => void (err += t), env: { DATA_DIR: dataDir }, isTTY: false, cwd: packageRoot, signal };
  return { cli, out: () => out, err: () => err };
}

beforeAll(async () => {
  server = await startServer(parseConfig({ APP_ENV: 'local', DATA_DIR: dataDir, PORT: '0', LOG_LEVEL: 'silent', SIM_SETTLEMENT_MS: '50' }), {
    log: pino({ level: 'silent' }),
    print: () => {},
  });
  receiver = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      verifyWebhook<{ event: string; transaction_id?: string }>({ rawBody: Buffer.concat(chunks), headers: req.headers, secret: secret ?? '' }).then(
        ({ event }) => {
          verified.push({ event: event.event, transaction_id: event.transaction_id });
          res.writeHead(200).end();
        },
        (e: Error) => {
          refused.push(e.message);
          res.writeHead(400).end();
        },
      );
    });
  });
  await new Promise<void>((r) => receiver.listen(0, '127.0.0.1', r));
  receiverUrl = `http://127.0.0.1:${(receiver.address() as { port: number }).port}/webhooks`;
}, 120_000);

afterAll(async () => {
  await server?.stop();
  await new Promise((r) => receiver?.close(r));
  rmSync(dataDir, { recursive: true, force: true });
});

describe('README quick start on a fresh local server', () => {
  it('every command succeeds as written and the payouts arrive as verified webhooks', async () => {
    const commands = quickStartCommands();
    expect(commands.map((c) => c[0])).toEqual(['listen', 'trigger', 'api']);

    // Step 2: listen, in the background (the README's second terminal).
    const stop = new AbortController();
    const listenIo = io(stop.signal);
    const listen = commands[0]!.map((a) => (a === 'http://localhost:3000/webhooks' ? receiverUrl : a));
    expect(listen).toContain(receiverUrl);
    const listening = runCli(listen, listenIo.cli);
    const deadline = Date.now() + 30_000;
    while (!/webhook secret (\S+)/.test(listenIo.out()) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
    secret = /webhook secret (\S+)/.exec(listenIo.out())?.[1];
    expect(secret).toMatch(/^whsec_/);

    // Step 3: the trigger, then the cash-out to maria@example.com.
    const ids: string[] = [];
    for (const command of commands.slice(1)) {
      const run = io();
      const code = await runCli([...command, '--json'], run.cli);
      expect(code, `${command.join(' ')}: ${run.out()} ${run.err()}`).toBe(0);
      const answer = JSON.parse(run.out()) as { transaction_id?: string; body?: { transaction_id?: string; worked?: boolean } };
      const id = answer.transaction_id ?? answer.body?.transaction_id;
      expect(id, run.out()).toMatch(/^PIXOUT/);
      ids.push(id!);
    }
    while (ids.some((id) => !verified.some((v) => v.event === 'pix.payout.confirmed' && v.transaction_id === id)) && Date.now() < deadline + 30_000) {
      await new Promise((r) => setTimeout(r, 100));
    }
    stop.abort();
    await listening;
    expect(refused).toEqual([]);
    for (const id of ids) expect(verified).toContainEqual({ event: 'pix.payout.confirmed', transaction_id: id });
  }, 120_000);

  it('a key nobody registered: the spec\'s destination_not_found, and a detail that says how to register it in the sandbox', async () => {
    const run = io();
    const code = await runCli(['api', 'POST', '/pix/cash-out', '-d', '{"amount": 100, "pix_key": "nobody@example.com", "pix_key_type": "email"}', '--json'], run.cli);
    expect(code).toBe(1);
    const { status, body } = JSON.parse(run.out()) as { status: number; body: { errors: Record<string, string>; code: string; detail: string } };
    expect(status).toBe(422);
    expect(body.errors).toEqual({ destination_not_found: 'Key not registered in the directory' });
    expect(body.detail).toContain('PIX key nobody@example.com is not registered in the directory');
    expect(body.detail).toContain(`${server.url}/api/sandbox/dict/keys`);
    expect(body.detail).toContain('"key":"nobody@example.com","type":"email"');
  });

  it('outside local mode the detail names the key only (no sandbox instructions)', async () => {
    const s = await startTestServer({ env: { APP_ENV: 'homologation' } });
    try {
      const m = await merchantWithKey(s);
      const res = await m.client.post('/pix/cash-out', { amount: 100, pix_key: 'nobody@example.com', pix_key_type: 'email' }, { sign: 'v2' });
      expect(res.status).toBe(422);
      expect(res.body).toEqual({ worked: false, errors: { destination_not_found: 'Key not registered in the directory' }, code: 'destination_not_found', detail: 'PIX key nobody@example.com is not registered in the directory' });
    } finally {
      await s.close();
    }
  });
});
