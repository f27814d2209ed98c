import { describe, expect, it } from 'vitest';
import { BACKENDS } from './helpers/db.js';
import { startTestServer } from './helpers/server.js';

/** Issue 10: health probes answer without driver error text when the database is gone. */
describe.each(BACKENDS)('health probes on %s', (backend) => {
  it('/readyz and the boleto health say "unavailable", never the driver error', async () => {
    const s = await startTestServer({ backend, workers: false });
    try {
      const key = await s.admin('POST', '/central-keys', { name: 'ERP' });
      expect(key.status).toBe(201);
      expect((await fetch(`${s.url}/readyz`)).status).toBe(200);
      await s.ctx.db.close();
      const ready = await fetch(`${s.url}/readyz`);
      expect(ready.status).toBe(503);
      const body = await ready.json();
      expect(body).toEqual({ status: 'not ready', checks: { database: 'unavailable', redis: 'not configured' } });
      const boleto = await fetch(`${s.url}/api/v1/central/health`, { headers: { 'x-api-key': key.body.api_key } });
      const text = await boleto.text();
      expect(boleto.status).toBeGreaterThanOrEqual(500);
      expect(text).not.toMatch(/closed|terminated|ended|pool|PGlite|error:/i);
    } finally {
      await s.close().catch(() => {});
    }
  });
});
