import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createOperator, type OperatorRole } from '../../src/auth/operators.js';
import { totpCode } from '../../src/auth/totp.js';
import { merchantWithKey, type MerchantFixture } from '../helpers/client.js';
import { balances, SIM_FAST } from '../helpers/pix.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

/** The rail simulator's panel (not in production): state, controls for owner and operations, an audit row per control. */
const PASSWORD = 'uma senha bem comprida';

describe('console rail simulator', () => {
  let s: TestServer;
  let a: MerchantFixture;
  const cookies: Record<string, string> = {};

  const signIn = async (username: string, role: OperatorRole) => {
    const { totpSecret } = await createOperator(s.ctx.db, { username, password: PASSWORD, role, createdBy: 'test' });
    const body = new URLSearchParams({ username, password: PASSWORD, code: totpCode(totpSecret, new Date()) });
    const res = await fetch(`${s.url}/console/login`, { method: 'POST', body, headers: { origin: s.url }, redirect: 'manual' });
    expect(res.status).toBe(303);
    cookies[username] = res.headers.get('set-cookie')!.split(';')[0]!;
  };
  const get = (who: string, path: string) => fetch(`${s.url}${path}`, { headers: { cookie: cookies[who]!, 'accept-language': 'en' }, redirect: 'manual' });
  const post = async (who: string, path: string, form: Record<string, string>) => {
    const csrf = /name="_csrf" value="([^"]+)"/.exec(await (await get(who, '/console')).text())![1]!;
    return fetch(`${s.url}${path}`, { method: 'POST', body: new URLSearchParams({ _csrf: csrf, ...form }), headers: { cookie: cookies[who]!, origin: s.url, 'accept-language': 'en' }, redirect: 'manual' });
  };

  beforeAll(async () => {
    s = await startTestServer({ env: { ...SIM_FAST, RATE_LIMIT_PER_MINUTE: '1000' } });
    a = await merchantWithKey(s, { name: 'Padaria', depositCents: 10_000 });
    await signIn('ops', 'operations');
    await signIn('sup', 'support');
  }, 60_000);
  afterAll(async () => {
    await s?.close();
  });

  it('shows the state and sends an inbound PIX, audited under the operator', async () => {
    const before = (await balances(s.ctx.db, a.accountId)).available;
    const pageRes = await get('ops', '/console/simulator');
    expect(pageRes.status).toBe(200);
    const text = await pageRes.text();
    expect(text).toContain('data-testid="sim-infractions"');
    expect(text).toContain('Inbound PIX to an account');
    const res = await post('ops', '/console/simulator/inbound', { account_id: String(a.accountId), amount: '12,34', payer_name: 'Rita' });
    expect(res.status).toBe(303);
    expect((await balances(s.ctx.db, a.accountId)).available - before).toBe(123_400);
    const audit = await s.ctx.db.query<{ actor: string; status: number }>(`SELECT actor, status FROM admin_audit_log WHERE route = '/console/simulator/inbound'`);
    expect(audit).toEqual([{ actor: 'operator:ops', status: 200 }]);
    const stall = await post('ops', '/console/simulator/stall', { delay_ms: '0' });
    expect(stall.status).toBe(303);
    expect(await s.ctx.db.query(`SELECT 1 FROM admin_audit_log WHERE route = '/console/simulator/stall'`)).toHaveLength(1);
  });

  it('refuses support (read-only for the rail) with 403 and no effect', async () => {
    expect((await get('sup', '/console/simulator')).status).toBe(403);
    const res = await post('sup', '/console/simulator/inbound', { account_id: String(a.accountId), amount: '1,00' });
    expect(res.status).toBe(403);
    expect(await s.ctx.db.query(`SELECT 1 FROM admin_audit_log WHERE route = '/console/simulator/inbound' AND actor = 'operator:sup'`)).toHaveLength(0);
  });
});
