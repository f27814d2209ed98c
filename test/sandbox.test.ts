import { describe, expect, it } from 'vitest';
import { startTestServer, TEST_ADMIN_TOKEN } from './helpers/server.js';

describe('sandbox prefix', () => {
  it('needs the admin token outside production', async () => {
    const s = await startTestServer();
    try {
      const res = await fetch(`${s.url}/api/sandbox/anything`, { method: 'POST' });
      expect(res.status).toBe(401);
      const authed = await fetch(`${s.url}/api/sandbox/anything`, { method: 'POST', headers: { authorization: `Bearer ${TEST_ADMIN_TOKEN}` } });
      expect(authed.status).toBe(404);
    } finally {
      await s.close();
    }
  });

  it('answers 404 for everything when APP_ENV=production, token or not', async () => {
    const s = await startTestServer({ env: { APP_ENV: 'production', DATABASE_URL: 'postgres://unused/db' } });
    try {
      const res = await fetch(`${s.url}/api/sandbox/dict/keys`, { method: 'POST', headers: { authorization: `Bearer ${TEST_ADMIN_TOKEN}`, 'content-type': 'application/json' }, body: '{}' });
      expect(res.status).toBe(404);
      expect(await res.json()).toEqual({ errors: { not_found: 'route not found' } });
    } finally {
      await s.close();
    }
  });
});
