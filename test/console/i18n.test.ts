import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createOperator } from '../../src/auth/operators.js';
import { totpCode } from '../../src/auth/totp.js';
import { merchantWithKey, type MerchantFixture } from '../helpers/client.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

/**
 * The console in pt-BR and English like the merchant portal (src/portal/i18n.ts): Accept-Language,
 * the pixgate_lang cookie set by the switch, <html lang>; no English label on a pt-BR page and no
 * Portuguese label on an English one.
 */
const PASSWORD = 'uma senha bem comprida';
const EN_LABELS = ['Search', 'Sign out', 'MED queue', 'Audit log', 'Operators', 'Available', 'Recent transactions', 'Open infractions', 'Failing endpoints', 'Username', 'Second factor', 'Export CSV', 'When (São Paulo)'];
const PT_LABELS = ['Busca', 'Sair', 'Fila MED', 'Registro de auditoria', 'Operadores', 'Disponível', 'Transações recentes', 'Infrações abertas', 'Endpoints com falhas', 'Usuário', 'Segundo fator', 'Exportar CSV', 'Quando (São Paulo)'];

describe('console languages', () => {
  let s: TestServer;
  let a: MerchantFixture;
  let cookie = '';
  let offset = 0;

  beforeAll(async () => {
    s = await startTestServer({ env: { RATE_LIMIT_PER_MINUTE: '1000' } });
    a = await merchantWithKey(s, { name: 'Padaria', depositCents: 10_000 });
    const { totpSecret } = await createOperator(s.ctx.db, { username: 'dona', password: PASSWORD, role: 'owner', createdBy: 'test' });
    const body = new URLSearchParams({ username: 'dona', password: PASSWORD, code: totpCode(totpSecret, new Date(Date.now() + offset)) });
    const res = await fetch(`${s.url}/console/login`, { method: 'POST', body, headers: { origin: s.url, 'content-type': 'application/x-www-form-urlencoded' }, redirect: 'manual' });
    expect(res.status).toBe(303);
    cookie = res.headers.get('set-cookie')!.split(';')[0]!;
  }, 60_000);
  afterAll(async () => {
    await s?.close();
  });

  const get = async (path: string, lang: string, extra = '') => {
    const res = await fetch(`${s.url}${path}`, { headers: { cookie: `${cookie}${extra}`, 'accept-language': lang } });
    expect(res.status, path).toBe(200);
    return res.text();
  };
  /** The visible text of a page: tags and attribute values removed (merchant data here has no label words). */
  const texts = async (lang: string, extra = '') => {
    const out: string[] = [];
    for (const path of ['/console', `/console/accounts/${a.accountId}`, '/console/med', '/console/webhooks', '/console/audit', '/console/operators']) out.push(await get(path, lang, extra));
    return out.join('\n');
  };

  it('pt-BR: <html lang="pt-BR"> and the Portuguese labels, none of the English ones', async () => {
    const all = await texts('pt-BR,pt;q=0.9');
    expect(all).toContain('<html lang="pt-BR">');
    expect(all).not.toContain('<html lang="en">');
    for (const l of PT_LABELS) expect(all, l).toContain(l);
    for (const l of EN_LABELS.filter((x) => !PT_LABELS.includes(x))) expect(all, l).not.toContain(`>${l}`);
    expect(all).toContain('R$');
  });

  it('en: <html lang="en"> and the English labels, none of the Portuguese ones', async () => {
    const all = await texts('en-US,en;q=0.9');
    expect(all).toContain('<html lang="en">');
    for (const l of EN_LABELS) expect(all, l).toContain(l);
    for (const l of PT_LABELS.filter((x) => !EN_LABELS.includes(x))) expect(all, l).not.toContain(`>${l}`);
  });

  it('the sign-in page follows Accept-Language; the switch sets a cookie that wins over the header', async () => {
    expect(await (await fetch(`${s.url}/console/login`, { headers: { 'accept-language': 'pt-BR' } })).text()).toContain('Código do aplicativo autenticador');
    expect(await (await fetch(`${s.url}/console/login`, { headers: { 'accept-language': 'en' } })).text()).toContain('Code from your authenticator app');
    const sw = await fetch(`${s.url}/console/language?to=en&next=${encodeURIComponent('/console/med')}`, { headers: { 'accept-language': 'pt-BR' }, redirect: 'manual' });
    expect(sw.status).toBe(303);
    expect(sw.headers.get('location')).toBe('/console/med');
    const set = sw.headers.get('set-cookie')!;
    expect(set).toMatch(/^pixgate_lang=en; Path=\/console; SameSite=Lax/);
    const page = await get('/console/med', 'pt-BR', `; ${set.split(';')[0]}`);
    expect(page).toContain('<html lang="en">');
    expect(page).toContain('href="/console/language?to=pt-BR&next=%2Fconsole%2Fmed"');
    const evil = await fetch(`${s.url}/console/language?to=en&next=${encodeURIComponent('//evil.example/')}`, { redirect: 'manual' });
    expect(evil.headers.get('location')).toBe('/console');
  });
});
