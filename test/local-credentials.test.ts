import { mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { afterAll, describe, expect, it } from 'vitest';
import { runCli } from '../src/cli/main.js';
import { parseConfig } from '../src/config.js';
import { localCredentialsPath } from '../src/localCredentials.js';
import { startServer } from '../src/server.js';

/** APP_ENV=local on the embedded database: the admin token and demo key survive a restart. */
describe('local credentials kept in the data folder', () => {
  const dir = mkdtempSync(join(tmpdir(), 'pixgate-local-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  async function start(env: Record<string, string> = {}) {
    let printed = '';
    const server = await startServer(parseConfig({ PORT: '0', DATA_DIR: dir, LOG_LEVEL: 'silent', ...env }), {
      log: pino({ level: 'silent' }),
      workers: false,
      print: (t) => void (printed += t),
    });
    return { server, printed };
  }

  it('a restart keeps the generated admin token and shows the demo key again; the CLI reads them', async () => {
    const first = await start();
    const token = first.server.ctx.config.adminToken;
    const demo = first.server.demo!;
    expect(demo.clientSecret).toBeTruthy();
    expect(first.printed).toContain(token);
    await first.server.stop();
    expect(statSync(localCredentialsPath(dir)).mode & 0o777).toBe(0o600);

    const second = await start();
    try {
      expect(second.server.ctx.config.adminToken).toBe(token);
      expect(second.server.demo).toBeNull(); // not seeded twice
      expect(second.printed).toContain(token);
      expect(second.printed).toContain(demo.clientSecret);
      const res = await fetch(`${second.server.url}/api/admin/accounts/${demo.accountId}`, { headers: { authorization: `Bearer ${token}` } });
      expect(res.status).toBe(200);
      const bal = await fetch(`${second.server.url}/api/external/balance`, { headers: { authorization: `ApiKey ${demo.clientId}:${demo.clientSecret}` } });
      expect(bal.status).toBe(200);

      let out = '';
      const code = await runCli(['local-credentials', '--data-dir', dir, '--json'], {
        stdout: (t) => void (out += t),
        stderr: () => {},
        env: {},
        isTTY: false,
        cwd: process.cwd(),
        signal: new AbortController().signal,
      });
      expect(code).toBe(0);
      expect(JSON.parse(out)).toMatchObject({ admin_token: token, demo: { client_id: demo.clientId, client_secret: demo.clientSecret } });
    } finally {
      await second.server.stop();
    }

    // A token set through ADMIN_TOKEN wins and is not written down.
    const third = await start({ ADMIN_TOKEN: 'operator-chosen-token-123' });
    expect(third.server.ctx.config.adminToken).toBe('operator-chosen-token-123');
    await third.server.stop();
  }, 120_000); // three starts of the embedded database on disk
});
