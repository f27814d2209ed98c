import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, type TestServer } from '../helpers/server.js';

/** The console's and the portal's public forms with bodies that are not forms: 415, never a 500. */
describe('console and portal forms with hostile bodies', () => {
  let s: TestServer;
  beforeAll(async () => {
    s = await startTestServer({ env: { APP_ENV: 'local' }, workers: false });
  }, 60_000);
  afterAll(async () => s?.close());

  const bodies: Array<[string, string | undefined]> = [
    ['application/json', '{}'],
    ['application/json', 'null'],
    ['application/json', '[1,2]'],
    ['application/json', '"text"'],
    ['text/plain', 'admin_token=x'],
    ['application/x-www-form-urlencoded', undefined],
  ];
  for (const path of ['/console/bootstrap?type=zD%2FI%3D%7B', '/console/login', '/portal/signin', '/portal/login']) {
    for (const [type, body] of bodies) {
      it(`POST ${path} with ${type} ${body ?? '(no body)'}`, async () => {
        const res = await fetch(`${s.url}${path}`, { method: 'POST', headers: { 'content-type': type, origin: s.url }, body, redirect: 'manual' });
        expect(res.status).toBe(body === undefined ? res.status : 415);
        expect(res.status).toBeGreaterThanOrEqual(400);
        expect(res.status).toBeLessThan(500);
        if (res.status === 415) expect(await res.text()).toContain('application/x-www-form-urlencoded');
      });
    }
  }
});
