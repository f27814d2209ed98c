import { afterAll, describe, expect, it } from 'vitest';
import { parseConfig } from '../../src/config.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

/** /console: always on in local mode, off in production unless CONSOLE_ENABLED=true (404 then). */
describe('console switch', () => {
  const servers: TestServer[] = [];
  afterAll(async () => {
    for (const s of servers) await s.close();
  });
  const base = { ADMIN_TOKEN: 'an-admin-token-of-some-length' };

  it('reads CONSOLE_ENABLED', () => {
    expect(parseConfig({ ...base, APP_ENV: 'local' }).consoleEnabled).toBe(true);
    expect(parseConfig({ ...base, APP_ENV: 'local', CONSOLE_ENABLED: 'false' }).consoleEnabled).toBe(true);
    expect(parseConfig({ ...base, APP_ENV: 'homologation' }).consoleEnabled).toBe(true);
    expect(parseConfig({ ...base, APP_ENV: 'homologation', CONSOLE_ENABLED: 'false' }).consoleEnabled).toBe(false);
    expect(() => parseConfig({ ...base, CONSOLE_ENABLED: 'yes' })).toThrow(/CONSOLE_ENABLED/);
  });

  it('answers 404 under /console in production unless enabled', async () => {
    const off = await startTestServer({ env: { APP_ENV: 'production', DATABASE_URL: 'postgres://unused/db' }, workers: false });
    servers.push(off);
    for (const path of ['/console', '/console/login', '/console/bootstrap', '/console/assets/console.css']) {
      expect((await fetch(`${off.url}${path}`, { redirect: 'manual' })).status, path).toBe(404);
    }
    const on = await startTestServer({ env: { APP_ENV: 'production', DATABASE_URL: 'postgres://unused/db', CONSOLE_ENABLED: 'true' }, workers: false });
    servers.push(on);
    const res = await fetch(`${on.url}/console`, { redirect: 'manual' });
    expect(res.status).toBe(303);
    expect(res.headers.get('location')).toBe('/console/login');
    expect(res.headers.get('content-security-policy')).toContain("default-src 'none'");
  }, 60_000);
});
