import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { dictionary, parseZonedDateTime, toZonedInput, formatBrl, formatCents, formatDate, formatDateTime, formatDateTimeZone, localeOf, negotiateLocale } from '../../src/portal/i18n.js';
import { portalReturnPath } from '../../src/portal/routes.js';
import { describeRefusal, reaisField } from '../../src/portal/errors.js';
import { DomainError, invalidFields } from '../../src/errors/catalog.js';
import { HttpError } from '../../src/http/errors.js';
import { merchantWithKey, type MerchantFixture } from '../helpers/client.js';
import { SIM_FAST } from '../helpers/pix.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { PortalHttp } from './portalHttp.js';

/** The portal's languages (src/portal/i18n.ts): negotiation, the switch, money and dates. */
describe('portal i18n: the mechanism', () => {
  it('picks pt-BR or en from Accept-Language by quality, pt-BR when neither is named', () => {
    expect(negotiateLocale(undefined)).toBe('pt-BR');
    expect(negotiateLocale('')).toBe('pt-BR');
    expect(negotiateLocale('*')).toBe('pt-BR');
    expect(negotiateLocale('de-DE,de;q=0.9')).toBe('pt-BR');
    expect(negotiateLocale('en-US,en;q=0.9')).toBe('en');
    expect(negotiateLocale('pt-BR,pt;q=0.9,en;q=0.8')).toBe('pt-BR');
    expect(negotiateLocale('pt-PT')).toBe('pt-BR');
    expect(negotiateLocale('de;q=1, en;q=0.5, pt;q=0.7')).toBe('pt-BR');
    expect(negotiateLocale('pt;q=0.2, EN-gb;q=0.8')).toBe('en');
    expect(negotiateLocale('en;q=0, pt-BR;q=0.1')).toBe('pt-BR');
    expect(negotiateLocale('fr, en;q=0.1')).toBe('en');
  });

  it('the cookie wins over the header; an unknown language or zone is ignored', () => {
    expect(localeOf({ lang: 'en' }, 'pt-BR')).toEqual({ locale: 'en', timeZone: 'America/Sao_Paulo' });
    expect(localeOf({ lang: 'xx', tz: 'Mars/Olympus' }, 'en')).toEqual({ locale: 'en', timeZone: 'America/Sao_Paulo' });
    expect(localeOf({ tz: 'America/Manaus' }, undefined)).toEqual({ locale: 'pt-BR', timeZone: 'America/Manaus' });
  });

  it('formats base units as R$ in the Brazilian format with integers only', () => {
    expect(formatBrl(0)).toBe('R$ 0,00');
    expect(formatBrl(500)).toBe('R$ 0,05');
    expect(formatBrl(12_345_600)).toBe('R$ 1.234,56');
    expect(formatBrl(12_345_699)).toBe('R$ 1.234,56'); // toward zero to the cent
    expect(formatBrl(-1_000_000)).toBe('−R$ 100,00');
    expect(formatBrl(123_456_789_012_345_600n)).toBe('R$ 12.345.678.901.234,56');
    expect(formatBrl('900719925474099300')).toBe('R$ 90.071.992.547.409,93');
    expect(() => formatBrl(1.5)).toThrow();
    expect(formatCents(123_456)).toBe('R$ 1.234,56');
  });

  it("formats dates in the merchant's time zone (America/Sao_Paulo by default)", () => {
    const at = '2026-11-27T02:05:00.000Z'; // 23:05 of the 26th in São Paulo (UTC−3)
    const pt = localeOf({}, 'pt-BR');
    const en = localeOf({}, 'en');
    expect(formatDateTime(at, pt)).toBe('26/11/2026 23:05');
    expect(formatDateTime(new Date(at), en)).toBe('Nov 26, 2026 23:05');
    expect(formatDate(at, pt)).toBe('26/11/2026');
    expect(formatDateTimeZone(at, pt)).toBe('26/11/2026 23:05 BRT');
    expect(formatDateTime(at, { locale: 'pt-BR', timeZone: 'UTC' })).toBe('27/11/2026 02:05');
    expect(formatDateTime(null, pt)).toBe('');
    expect(formatDateTime('not a date', pt)).toBe('');
  });

  it("reads a wall-clock time typed in the merchant's zone", () => {
    expect(parseZonedDateTime('2026-11-27T14:05', 'America/Sao_Paulo')!.toISOString()).toBe('2026-11-27T17:05:00.000Z');
    expect(parseZonedDateTime('2026-11-27', 'America/Sao_Paulo')!.toISOString()).toBe('2026-11-27T03:00:00.000Z');
    expect(parseZonedDateTime('2026-07-01T12:00', 'Europe/Lisbon')!.toISOString()).toBe('2026-07-01T11:00:00.000Z'); // summer time
    expect(toZonedInput(new Date('2026-11-27T17:05:00Z'), 'America/Sao_Paulo')).toBe('2026-11-27T14:05');
    for (const bad of ['2026-02-30T10:00', '2026-11-27T24:00', 'yesterday', '', undefined]) expect(parseZonedDateTime(bad, 'UTC')).toBeNull();
  });

  it('a dictionary answers in the language asked for, with arguments', () => {
    const d = dictionary({ hello: 'Hello', items: (n: number) => `${n} items` }, { hello: 'Olá', items: (n) => `${n} itens` });
    expect(d('en').hello).toBe('Hello');
    expect(d({ locale: 'pt-BR', timeZone: 'UTC' }).items(3)).toBe('3 itens');
  });

  it('names field errors by field (never an array index), with labels, in both languages', () => {
    const en = localeOf({}, 'en');
    const pt = localeOf({}, 'pt-BR');
    const events = new DomainError('invalid_events', { message: "can't be blank" });
    expect(describeRefusal(events, en, { events: 'Events' })).toMatchObject({ text: "Check the fields marked below. Events: can't be blank.", fields: { events: ["can't be blank"] }, status: 400 });
    expect(describeRefusal(events, pt, { events: 'Eventos' })!.text).toBe('Confira os campos indicados abaixo. Eventos: não pode ficar em branco.');
    // the same refusal as the API's body (an HttpError), read by field name too
    const body = describeRefusal(new HttpError(400, { errors: { events: ["can't be blank"] } }), en, { events: 'Events' })!;
    expect(body.text).not.toMatch(/\b0 /);
    expect(body.fields).toEqual({ events: ["can't be blank"] });
    const map = describeRefusal(invalidFields({ amount: ['is required'], description: ['is too long (maximum is 140 characters)'] }), pt, { amount: 'Valor (R$)' })!;
    expect(map.fields).toEqual({ amount: ['é obrigatório'], description: ['é longo demais (máximo de 140 caracteres)'] });
    expect(map.text).toBe('Confira os campos indicados abaixo. Valor (R$): é obrigatório; description: é longo demais (máximo de 140 caracteres).');
    // a code about one field is that field's error when the form has it; otherwise the summary
    const unknownKey = new DomainError('destination_not_found', { detail: 'Key not registered in the directory' });
    expect(describeRefusal(unknownKey, pt, { pix_key: 'Chave PIX' })!.fields).toEqual({ pix_key: ['Chave não cadastrada no diretório'] });
    expect(describeRefusal(unknownKey, en)!.text).toBe('Key not registered in the directory');
    expect(describeRefusal(new Error('database gone'), en)).toBeUndefined(); // a fault, not a refusal
  });

  it('reads reais or gives the field its error', () => {
    expect(reaisField({ amount: '1.234,56' }, 'amount')).toBe(123_456);
    expect(reaisField({ amount: ' ' }, 'amount', true)).toBeUndefined();
    expect(() => reaisField({ amount: 'abc' }, 'amount')).toThrow(expect.objectContaining({ fields: { amount: ['must be an amount in reais, like 25,00'] } }));
    expect(() => reaisField({}, 'amount')).toThrow(expect.objectContaining({ fields: { amount: ['is required'] } }));
  });

  it('the switch only comes back to a path of the portal', () => {
    expect(portalReturnPath('/portal/statement?status=settled')).toBe('/portal/statement?status=settled');
    expect(portalReturnPath('/portal')).toBe('/portal');
    for (const bad of ['https://evil.example/', '//evil.example/portal', '/portal//evil', '/portalx', '/\\evil', '/portal/\\\\evil', 'javascript:alert(1)', undefined, ['/portal']]) {
      expect(portalReturnPath(bad)).toBe('/portal');
    }
  });
});

describe('portal i18n over HTTP', () => {
  let s: TestServer;
  let a: MerchantFixture;

  beforeAll(async () => {
    s = await startTestServer({ env: SIM_FAST, workers: false });
    a = await merchantWithKey(s, { name: 'Loja A', depositCents: 10_000 });
  });
  afterAll(async () => {
    await s?.close();
  });

  it('answers in the language of Accept-Language, sets <html lang>, and the switch sets a cookie that wins', async () => {
    const pt = await fetch(`${s.url}/portal/login`, { headers: { 'accept-language': 'pt-BR,pt;q=0.9' } });
    const ptText = await pt.text();
    expect(ptText).toContain('<html lang="pt-BR">');
    expect(pt.headers.get('content-language')).toBe('pt-BR');
    const en = await fetch(`${s.url}/portal/login`, { headers: { 'accept-language': 'en-US,en;q=0.9' } });
    expect(await en.text()).toContain('<html lang="en">');

    const sw = await fetch(`${s.url}/portal/language?to=en&next=${encodeURIComponent('/portal/login')}`, { headers: { 'accept-language': 'pt-BR' }, redirect: 'manual' });
    expect(sw.status).toBe(303);
    expect(sw.headers.get('location')).toBe('/portal/login');
    const cookie = sw.headers.get('set-cookie')!;
    expect(cookie).toMatch(/^pixgate_lang=en; Path=\/portal; SameSite=Lax; Max-Age=\d+/);
    const switched = await fetch(`${s.url}/portal/login`, { headers: { 'accept-language': 'pt-BR', cookie: cookie.split(';')[0]! } });
    expect(await switched.text()).toContain('<html lang="en">');

    const evil = await fetch(`${s.url}/portal/language?to=en&next=${encodeURIComponent('//evil.example/')}`, { redirect: 'manual' });
    expect(evil.headers.get('location')).toBe('/portal');
  });

  it('a signed-in page carries the switch, in both languages, and the time zone it shows', async () => {
    const portal = await PortalHttp.signIn(s.url, a.client.clientId, a.client.clientSecret);
    portal.acceptLanguage = 'pt-BR';
    const pt = await portal.get('/portal/balance');
    expect(pt.text).toContain('<html lang="pt-BR">');
    expect(pt.text).toContain('Horários em <select name="tz" data-testid="tz"><option selected>America/Sao_Paulo</option>');
    expect(pt.text).toContain('href="/portal/language?to=en&amp;next=%2Fportal%2Fbalance"');
    portal.acceptLanguage = 'en';
    const en = await portal.get('/portal/balance');
    expect(en.text).toContain('<html lang="en">');
    expect(en.text).toContain('Times in <select name="tz" data-testid="tz"><option selected>America/Sao_Paulo</option>');
  });

  it("the footer's zone switch sets the zone the dates are shown in", async () => {
    const portal = await PortalHttp.signIn(s.url, a.client.clientId, a.client.clientSecret);
    const [deposit] = await s.ctx.db.query<{ created_at: Date }>('SELECT created_at FROM transactions WHERE account_id = $1', [a.accountId]);
    const sp = await portal.get('/portal/statement');
    expect(sp.text).toContain(formatDateTime(deposit!.created_at, { locale: 'en', timeZone: 'America/Sao_Paulo' }));
    const sw = await fetch(`${s.url}/portal/language?tz=America/Manaus&next=/portal/statement`, { redirect: 'manual' });
    expect(sw.headers.get('set-cookie')).toMatch(/^pixgate_tz=America\/Manaus; Path=\/portal; SameSite=Lax/);
    portal.cookie = `${portal.cookie}; ${sw.headers.get('set-cookie')!.split(';')[0]}`;
    const manaus = await portal.get('/portal/statement');
    expect(manaus.text).toContain(formatDateTime(deposit!.created_at, { locale: 'en', timeZone: 'America/Manaus' }));
    expect(manaus.text).toContain('<option selected>America/Manaus</option>');
    expect(formatDateTime(deposit!.created_at, { locale: 'en', timeZone: 'America/Manaus' })).not.toBe(formatDateTime(deposit!.created_at, { locale: 'en', timeZone: 'America/Sao_Paulo' }));
  });
});
