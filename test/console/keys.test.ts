import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createOperator, type OperatorRole } from '../../src/auth/operators.js';
import { totpCode } from '../../src/auth/totp.js';
import { merchantWithKey, type MerchantFixture } from '../helpers/client.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

/** Revoking a merchant's API key from the console: owner and operations only, at once, audited. */
const PASSWORD = 'uma senha bem comprida';

describe('console: API key revocation', () => {
  let s: TestServer;
  let a: MerchantFixture;
  const cookies: Record<string, string> = {};
  const get = (who: string, path: string) => fetch(`${s.url}${path}`, { headers: { cookie: cookies[who]!, 'accept-language': 'en' }, redirect: 'manual' });
  const signIn = async (username: string, role: OperatorRole) => {
    const { totpSecret } = await createOperator(s.ctx.db, { username, password: PASSWORD, role, createdBy: 'test' });
    const res = await fetch(`${s.url}/console/login`, {
      method: 'POST',
      body: new URLSearchParams({ username, password: PASSWORD, code: totpCode(totpSecret, new Date()) }),
      headers: { origin: s.url },
      redirect: 'manual',
    });
    cookies[username] = res.headers.get('set-cookie')!.split(';')[0]!;
  };
  const post = async (who: string, path: string, form: Record<string, string>) => {
    const csrf = /name="_csrf" value="([^"]+)"/.exec(await (await get(who, '/console')).text())![1]!;
    return fetch(`${s.url}${path}`, { method: 'POST', body: new URLSearchParams({ _csrf: csrf, ...form }), headers: { cookie: cookies[who]!, origin: s.url, 'accept-language': 'en' }, redirect: 'manual' });
  };
  const active = async () => (await s.ctx.db.query<{ active: boolean }>('SELECT active FROM api_keys WHERE client_id = $1', [a.client.clientId]))[0]!.active;

  beforeAll(async () => {
    s = await startTestServer({ env: { RATE_LIMIT_PER_MINUTE: '1000' } });
    a = await merchantWithKey(s, { name: 'Padaria', depositCents: 10_000 });
    await signIn('ops', 'operations');
    await signIn('sup', 'support');
  }, 120_000);
  afterAll(async () => {
    await s?.close();
  });

  it('support sees the keys without a revoke button, and is refused the action (nothing revoked, nothing audited)', async () => {
    const page = await (await get('sup', `/console/accounts/${a.accountId}`)).text();
    expect(page).toContain(a.client.clientId);
    expect(page).not.toContain(`data-revoke="${a.client.clientId}"`);
    const res = await post('sup', `/console/accounts/${a.accountId}/keys/revoke`, { client_id: a.client.clientId });
    expect(res.status).toBe(403);
    expect(await active()).toBe(true);
    expect(await s.ctx.db.query(`SELECT 1 FROM admin_audit_log WHERE route = '/console/accounts/:id/keys/revoke'`)).toHaveLength(0);
  });

  it('operations revokes: the key is refused at once, the merchant gets api_key.revoked, the audit row names the operator', async () => {
    expect((await a.client.get('/balance')).status).toBe(200);
    expect(await (await get('ops', `/console/accounts/${a.accountId}`)).text()).toContain(`data-revoke="${a.client.clientId}"`);
    const res = await post('ops', `/console/accounts/${a.accountId}/keys/revoke`, { client_id: a.client.clientId });
    expect(res.status).toBe(303);
    expect(await active()).toBe(false);
    const refused = await a.client.get('/balance');
    expect(refused.status).toBe(401);
    const audit = await s.ctx.db.query<{ actor: string; status: number }>(`SELECT actor, status FROM admin_audit_log WHERE route = '/console/accounts/:id/keys/revoke'`);
    expect(audit).toEqual([{ actor: 'operator:ops', status: 200 }]);
    const events = await s.ctx.db.query<{ event: string }>(`SELECT event FROM outbox_events WHERE event = 'api_key.revoked'`);
    expect(events).toHaveLength(1);
    // Again: nothing changes, no second event.
    expect((await post('ops', `/console/accounts/${a.accountId}/keys/revoke`, { client_id: a.client.clientId })).status).toBe(303);
    expect(await s.ctx.db.query(`SELECT 1 FROM outbox_events WHERE event = 'api_key.revoked'`)).toHaveLength(1);
  });

  it("another merchant's key cannot be revoked through this account", async () => {
    const b = await merchantWithKey(s, { name: 'Outra' });
    await post('ops', `/console/accounts/${a.accountId}/keys/revoke`, { client_id: b.client.clientId });
    expect((await s.ctx.db.query<{ active: boolean }>('SELECT active FROM api_keys WHERE client_id = $1', [b.client.clientId]))[0]!.active).toBe(true);
  });
});
