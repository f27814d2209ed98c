import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EVENT_CATALOG } from '../../src/events/catalog.js';
import { insertAccount } from '../../src/merchants/repository.js';
import { openBooks } from '../../src/ledger/ledger.js';
import { BACKENDS } from '../helpers/db.js';
import { merchantWithKey, type MerchantFixture } from '../helpers/client.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

const UUID_V4 = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;
const ISO_Z = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;
const ISO_NAIVE = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}$/;
const INSECURE = { worked: false, detail: 'URL must use HTTPS (HTTP is accepted only with allow_insecure: true)' };
const BLANK = { errors: { events: ["can't be blank"] } };

/** Hosts refused even with allow_insecure: the spec's list, the ranges beyond it, and encoded forms. */
const PRIVATE_HOSTS: Array<[string, string]> = [
  // spec: localhost, 127/8, 10/8, 192.168/16, 172.16-31, .local, .internal
  ['localhost', 'localhost'],
  ['LOCALHOST', 'localhost'],
  ['localhost.', 'localhost'],
  ['api.localhost', '.localhost name'],
  ['127.0.0.1', 'loopback'],
  ['127.255.255.254', 'loopback'],
  ['10.0.0.1', 'private network'],
  ['10.255.255.255', 'private network'],
  ['192.168.0.1', 'private network'],
  ['192.168.255.255', 'private network'],
  ['172.16.0.1', 'private network'],
  ['172.20.10.5', 'private network'],
  ['172.31.255.255', 'private network'],
  ['printer.local', '.local name'],
  ['printer.local.', '.local name'],
  ['metadata.google.internal', '.internal name'],
  ['api.corp.internal', '.internal name'],
  // beyond the spec
  ['0.0.0.0', 'this network'],
  ['169.254.169.254', 'link-local'],
  ['100.64.0.1', 'shared address space'],
  ['100.127.255.254', 'shared address space'],
  ['198.18.0.1', 'benchmarking'],
  ['224.0.0.1', 'multicast'],
  ['255.255.255.255', 'reserved'],
  ['router.home.arpa', '.home.arpa name'],
  ['intranet', 'single-label name'],
  ['[::1]', 'loopback'],
  ['[0:0:0:0:0:0:0:1]', 'loopback'],
  ['[::]', 'unspecified'],
  ['[fe80::1]', 'link-local'],
  ['[febf:ffff::1]', 'link-local'],
  ['[fc00::1]', 'unique-local'],
  ['[fd12:3456:789a::1]', 'unique-local'],
  ['[ff02::1]', 'multicast'],
  ['[::ffff:127.0.0.1]', 'IPv4-mapped 127.0.0.1, loopback'],
  ['[::ffff:7f00:1]', 'IPv4-mapped 127.0.0.1, loopback'],
  ['[::ffff:10.0.0.1]', 'IPv4-mapped 10.0.0.1, private network'],
  ['[::ffff:169.254.169.254]', 'IPv4-mapped 169.254.169.254, link-local'],
  ['[::ffff:0:127.0.0.1]', 'IPv4-translated 127.0.0.1, loopback'],
  ['[::127.0.0.1]', 'IPv4-compatible'],
  ['[64:ff9b::169.254.169.254]', 'NAT64 169.254.169.254, link-local'],
  ['[2002:7f00:1::1]', '6to4 127.0.0.1, loopback'],
  // IPv4 in decimal, octal, hex and short forms (WHATWG URL parsing turns them into dotted quads)
  ['2130706433', 'loopback'],
  ['0x7f.1', 'loopback'],
  ['017700000001', 'loopback'],
  ['127.1', 'loopback'],
  ['0x7f000001', 'loopback'],
  ['0177.0.0.1', 'loopback'],
  ['0x7f.0x0.0x0.0x1', 'loopback'],
  ['0', 'this network'],
  ['167772161', 'private network'], // 10.0.0.1
  ['012.0.0.1', 'private network'], // 10.0.0.1
  ['0xa.0.0.1', 'private network'],
  ['3232235521', 'private network'], // 192.168.0.1
  ['0xc0.0xa8.1', 'private network'], // 192.168.0.1
  ['0xac100001', 'private network'], // 172.16.0.1
  ['2852039166', 'link-local'], // 169.254.169.254
  ['0xa9fea9fe', 'link-local'],
  ['0251.0376.0251.0376', 'link-local'],
];

/** Public destinations next to the refused ranges. */
const PUBLIC_HOSTS = ['hooks.example.com', '8.8.8.8', '172.15.255.255', '172.32.0.1', '100.128.0.1', '11.0.0.1', '[2001:4860:4860::8888]', '169.255.0.1'];

describe.each(BACKENDS)('webhook registration on %s', (backend) => {
  let s: TestServer;
  let m: MerchantFixture;
  beforeAll(async () => {
    s = await startTestServer({ backend, env: { WEBHOOK_ALLOWED_HOSTS: '127.0.0.1:4000,receiver.corp.internal,[::1]:9000' } });
    m = await merchantWithKey(s);
  });
  afterAll(async () => s?.close());

  const create = (fx: MerchantFixture, body: unknown, options = {}) => fx.client.post('/webhooks', body, options);

  it('POST /webhooks answers 201 with the create form; the secret is generated when none is given', async () => {
    const res = await create(m, { url: 'https://hooks.example.com/pix', events: ['pix.charge.paid', 'pix.payout.confirmed'] });
    expect(res.status).toBe(201);
    expect(res.body).toEqual({
      worked: true,
      id: expect.stringMatching(UUID_V4),
      url: 'https://hooks.example.com/pix',
      events: ['pix.charge.paid', 'pix.payout.confirmed'],
      secret: expect.stringMatching(/^whsec_[A-Za-z0-9+/]{43}=$/),
      description: null,
      is_active: true,
      created_at: expect.stringMatching(ISO_Z),
    });
    expect(Object.keys(res.body)).toEqual(['worked', 'id', 'url', 'events', 'secret', 'description', 'is_active', 'created_at']);
    const again = await create(m, { url: 'https://hooks.example.com/pix', events: ['pix.charge.paid'] });
    expect(again.body.secret).not.toBe(res.body.secret);
  });

  it('stores the URL as parsed: lower-case host, root path, no fragment', async () => {
    const res = await create(m, { url: 'https://Hooks.EXAMPLE.com?source=pixgate#top', events: ['pix.charge.paid'] });
    expect(res.status).toBe(201);
    expect(res.body.url).toBe('https://hooks.example.com/?source=pixgate');
  });

  it('keeps a given secret, description and allow_insecure; de-duplicates events', async () => {
    const res = await create(m, {
      url: 'http://hooks.example.com/plain',
      events: ['pix.charge.paid', 'pix.charge.paid', 'pix.return.received'],
      secret: 'my-own-secret-0123456789',
      description: 'Loja — produção',
      allow_insecure: true,
    });
    expect(res.status).toBe(201);
    expect(res.body).toMatchObject({
      url: 'http://hooks.example.com/plain',
      events: ['pix.charge.paid', 'pix.return.received'],
      secret: 'my-own-secret-0123456789',
      description: 'Loja — produção',
    });
    const list = await m.client.get('/webhooks');
    expect(list.body.find((w: any) => w.id === res.body.id)).toMatchObject({ allow_insecure: true, description: 'Loja — produção' });
  });

  it('GET /webhooks answers a bare array in the list form', async () => {
    const fx = await merchantWithKey(s);
    const created = await create(fx, { url: 'https://a.example.com/h', events: ['pix.payout.failed'], description: 'first' });
    const res = await fx.client.get('/webhooks');
    expect(res.status).toBe(200);
    expect(Array.isArray(res.body)).toBe(true);
    expect(res.body).toEqual([
      {
        id: created.body.id,
        url: 'https://a.example.com/h',
        events: ['pix.payout.failed'],
        secret: created.body.secret,
        description: 'first',
        account_id: fx.accountId,
        is_active: true,
        allow_insecure: false,
        status: 'active',
        created_at: expect.stringMatching(ISO_NAIVE),
        updated_at: expect.stringMatching(ISO_NAIVE),
      },
    ]);
    expect(res.body[0].created_at).toBe(created.body.created_at.slice(0, -1));
    expect(res.headers.get('x-ratelimit-remaining')).not.toBeNull();
  });

  it('status is derived from is_active (inactive after an operator pauses it)', async () => {
    const fx = await merchantWithKey(s);
    const created = await create(fx, { url: 'https://b.example.com/h', events: ['pix.charge.paid'] });
    const paused = await s.admin('PATCH', `/webhooks/${created.body.id}`, { is_active: false });
    expect(paused.status).toBe(200);
    const res = await fx.client.get('/webhooks');
    expect(res.body[0]).toMatchObject({ is_active: false, status: 'inactive' });
  });

  it('422 {worked: false, detail} for a URL that is not HTTPS, unless allow_insecure', async () => {
    expect((await create(m, { url: 'http://hooks.example.com/', events: ['pix.charge.paid'] })).body).toEqual(INSECURE);
    const res = await create(m, { url: 'http://hooks.example.com/', events: ['pix.charge.paid'], allow_insecure: false });
    expect(res.status).toBe(422);
    expect(res.body).toEqual(INSECURE);
    for (const url of ['ftp://hooks.example.com/', 'ws://hooks.example.com/', 'file:///etc/passwd', 'javascript:alert(1)']) {
      const r = await create(m, { url, events: ['pix.charge.paid'], allow_insecure: true });
      expect([r.status, r.body]).toEqual([422, INSECURE]);
    }
  });

  it('400 {errors: {events: ["can\'t be blank"]}} when events is missing, null or empty', async () => {
    for (const body of [{ url: 'https://x.example.com/' }, { url: 'https://x.example.com/', events: null }, { url: 'https://x.example.com/', events: [] }]) {
      const res = await create(m, body);
      expect(res.status).toBe(400);
      expect(res.body).toEqual(BLANK);
    }
  });

  it('400 "contains invalid events: …" for unknown events and events of other contracts', async () => {
    const res = await create(m, { url: 'https://x.example.com/', events: ['pix.charge.paid', 'boleto.paid', 'charge.succeeded', 'PIX.CHARGE.PAID'] });
    expect(res.status).toBe(400);
    expect(res.body).toEqual({ errors: { events: ['contains invalid events: boleto.paid, charge.succeeded, PIX.CHARGE.PAID'] } });
    expect(res.body.errors.events[0].startsWith('contains invalid events:')).toBe(true);
    const notStrings = await create(m, { url: 'https://x.example.com/', events: 'pix.charge.paid' });
    expect([notStrings.status, notStrings.body]).toEqual([400, { errors: { events: ['must be an array of event names'] } }]);
    const mixed = await create(m, { url: 'https://x.example.com/', events: ['pix.charge.paid', 42] });
    expect(mixed.body).toEqual({ errors: { events: ['must be an array of event names'] } });
  });

  it('every catalog name is accepted, alias and manual test event included', async () => {
    const fx = await merchantWithKey(s);
    const res = await create(fx, { url: 'https://all.example.com/', events: EVENT_CATALOG.map((e) => e.event) });
    expect(res.status).toBe(201);
    expect(res.body.events).toEqual(EVENT_CATALOG.map((e) => e.event));
  });

  it('checks in order: fields, URL, HTTPS (422), events blank (400), events invalid (400), destination (422)', async () => {
    // HTTPS before events
    expect((await create(m, { url: 'http://x.example.com/' })).body).toEqual(INSECURE);
    expect((await create(m, { url: 'http://127.0.0.1/', events: ['nope'] })).body).toEqual(INSECURE);
    // events before the destination
    expect((await create(m, { url: 'https://127.0.0.1/', events: [] })).body).toEqual(BLANK);
    expect((await create(m, { url: 'https://127.0.0.1/', events: ['nope'] })).body).toEqual({ errors: { events: ['contains invalid events: nope'] } });
    expect((await create(m, { url: 'https://127.0.0.1/', events: ['pix.charge.paid'] })).status).toBe(422);
    // field types before everything
    expect((await create(m, { url: 'http://x.example.com/', events: [], allow_insecure: 'yes' })).body).toEqual({
      errors: { bad_request: { allow_insecure: ['must be a boolean'] } },
    });
  });

  it('400 field map for the other fields', async () => {
    const cases: Array<[unknown, unknown]> = [
      [{ events: ['pix.charge.paid'] }, { url: ['is required'] }],
      [{ url: '', events: ['pix.charge.paid'] }, { url: ["can't be blank"] }],
      [{ url: 42, events: ['pix.charge.paid'] }, { url: ['must be a string'] }],
      [{ url: `https://x.example.com/${'a'.repeat(2048)}`, events: ['pix.charge.paid'] }, { url: ['is too long (maximum is 2048 characters)'] }],
      [{ url: 'not a url', events: ['pix.charge.paid'] }, { url: ['is not a valid absolute URL'] }],
      [{ url: '/relative/path', events: ['pix.charge.paid'] }, { url: ['is not a valid absolute URL'] }],
      [{ url: 'https://user:pw@x.example.com/', events: ['pix.charge.paid'] }, { url: ['must not contain a user name or password'] }],
      [{ url: 'https://x.example.com/', events: ['pix.charge.paid'], secret: 'short' }, { secret: ['is too short (minimum is 16 characters)'] }],
      [{ url: 'https://x.example.com/', events: ['pix.charge.paid'], secret: 'x'.repeat(257) }, { secret: ['is too long (maximum is 256 characters)'] }],
      [{ url: 'https://x.example.com/', events: ['pix.charge.paid'], description: 'd'.repeat(256) }, { description: ['is too long (maximum is 255 characters)'] }],
      [{ url: 'https://x.example.com/', events: ['pix.charge.paid'], is_active: false }, { is_active: ['is not a permitted field'] }],
      [[], { body: ['must be a JSON object'] }],
    ];
    for (const [body, fields] of cases) {
      const res = await create(m, body);
      expect([res.status, res.body], JSON.stringify(body).slice(0, 80)).toEqual([400, { errors: { bad_request: fields } }]);
    }
  });

  it.each(PRIVATE_HOSTS)('refuses the private destination %s (422), even with allow_insecure', async (host, why) => {
    for (const [scheme, allowInsecure] of [['https', false], ['http', true]] as const) {
      const res = await create(m, { url: `${scheme}://${host}/hook`, events: ['pix.charge.paid'], allow_insecure: allowInsecure });
      expect(res.status).toBe(422);
      expect(res.body).toEqual({ worked: false, detail: expect.stringContaining(`: ${why}); webhooks must reach a public address.`) });
      expect(res.body.detail).toMatch(/^URL points to a private or reserved destination \(/);
    }
  });

  it('names the normalized host in the detail, and the operator setting that allows it', async () => {
    const res = await create(m, { url: 'https://2130706433/', events: ['pix.charge.paid'] });
    expect(res.body).toEqual({
      worked: false,
      detail:
        'URL points to a private or reserved destination (127.0.0.1: loopback); webhooks must reach a public address. ' +
        'To deliver to a receiver on your own machine or network, the operator lists it in the server setting WEBHOOK_ALLOWED_HOSTS ' +
        '(e.g. WEBHOOK_ALLOWED_HOSTS=127.0.0.1) and an http URL also needs allow_insecure: true; ' +
        'or, without registering a webhook, run: pixgate listen --forward-to <your local URL>',
    });
    const local = await create(m, { url: 'http://localhost:3000/hooks', events: ['pix.charge.paid'], allow_insecure: true });
    expect(local.body.detail).toContain('WEBHOOK_ALLOWED_HOSTS=localhost:3000');
  });

  it('accepts public destinations next to the refused ranges', async () => {
    const fx = await merchantWithKey(s);
    for (const host of PUBLIC_HOSTS) {
      const res = await create(fx, { url: `https://${host}/hook`, events: ['pix.charge.paid'] });
      expect([host, res.status]).toEqual([host, 201]);
    }
  });

  it('WEBHOOK_ALLOWED_HOSTS is the only exemption: host:port entries match that port, host entries any port', async () => {
    const fx = await merchantWithKey(s);
    const accepted = ['http://127.0.0.1:4000/hook', 'http://2130706433:4000/hook', 'https://receiver.corp.internal/h', 'https://receiver.corp.internal:8443/h', 'http://[::1]:9000/'];
    for (const url of accepted) {
      const res = await create(fx, { url, events: ['pix.charge.paid'], allow_insecure: true });
      expect([url, res.status]).toEqual([url, 201]);
    }
    for (const url of ['http://127.0.0.1:4001/hook', 'http://127.0.0.1/hook', 'https://other.corp.internal/', 'http://[::1]:9001/']) {
      const res = await create(fx, { url, events: ['pix.charge.paid'], allow_insecure: true });
      expect([url, res.status]).toEqual([url, 422]);
    }
    // The exemption does not lift the HTTPS rule.
    expect((await create(fx, { url: 'http://127.0.0.1:4000/hook', events: ['pix.charge.paid'] })).body).toEqual(INSECURE);
  });

  it('DELETE /webhooks/:id: 204 with an empty body, then 404; the webhook leaves the list', async () => {
    const fx = await merchantWithKey(s);
    const created = await create(fx, { url: 'https://d.example.com/', events: ['pix.charge.paid'] });
    const res = await fx.client.delete(`/webhooks/${created.body.id}`);
    expect(res.status).toBe(204);
    expect(res.text).toBe('');
    const again = await fx.client.delete(`/webhooks/${created.body.id}`);
    expect([again.status, again.body]).toEqual([404, { errors: { not_found: 'webhook not found' } }]);
    expect((await fx.client.get('/webhooks')).body).toEqual([]);
    const upper = await create(fx, { url: 'https://d.example.com/', events: ['pix.charge.paid'] });
    expect((await fx.client.delete(`/webhooks/${upper.body.id.toUpperCase()}`)).status).toBe(204);
  });

  it('DELETE: 400 for an id that is not a UUID; 404 for an unknown one', async () => {
    for (const id of ['123', 'not-a-uuid', '6a2f41a3-c54c-fce8-32d2-0324e1c32e2', "' OR 1=1 --"]) {
      const res = await m.client.delete(`/webhooks/${encodeURIComponent(id)}`);
      expect([id, res.status, res.body]).toEqual([id, 400, { errors: { bad_request: 'id must be a valid UUID' } }]);
    }
    const res = await m.client.delete('/webhooks/6a2f41a3-c54c-4ce8-92d2-0324e1c32e22');
    expect([res.status, res.body]).toEqual([404, { errors: { not_found: 'webhook not found' } }]);
  });

  it("another merchant's webhook is invisible: 404 on delete, absent from the list", async () => {
    const a = await merchantWithKey(s);
    const b = await merchantWithKey(s);
    const created = await create(a, { url: 'https://a.example.com/', events: ['pix.charge.paid'] });
    const res = await b.client.delete(`/webhooks/${created.body.id}`);
    expect([res.status, res.body]).toEqual([404, { errors: { not_found: 'webhook not found' } }]);
    expect((await b.client.get('/webhooks')).body).toEqual([]);
    expect((await a.client.get('/webhooks')).body).toHaveLength(1);
  });

  it('an account key registers account webhooks and sees only its account; a merchant-wide key registers global ones and sees all', async () => {
    const fx = await merchantWithKey(s, { accountScoped: false });
    const wide = fx.client; // no account: merchant-wide
    // A second account of the same merchant, with its own account key.
    const second = await s.ctx.db.transaction(async (tx) => {
      const acc = await insertAccount(tx, fx.merchantId);
      await openBooks(tx, acc.id);
      return acc;
    });
    const keyFor = async (accountId: number) => {
      const k = await s.admin('POST', '/api-keys', { merchant_id: fx.merchantId, account_id: accountId, permissions: ['account:read', 'account:write'], ip_whitelist: ['127.0.0.1', '::1'] });
      return new (wide.constructor as any)(s.url, k.body.client_id, k.body.client_secret) as typeof wide;
    };
    const first = await keyFor(fx.accountId);
    const other = await keyFor(second.id);

    const global = await wide.post('/webhooks', { url: 'https://global.example.com/', events: ['pix.charge.paid'] });
    const mine = await first.post('/webhooks', { url: 'https://first.example.com/', events: ['pix.charge.paid'] });
    const theirs = await other.post('/webhooks', { url: 'https://second.example.com/', events: ['pix.charge.paid'] });

    const wideList = (await wide.get('/webhooks')).body;
    expect(wideList.map((w: any) => [w.id, w.account_id])).toEqual([
      [global.body.id, null],
      [mine.body.id, fx.accountId],
      [theirs.body.id, second.id],
    ]);
    expect((await first.get('/webhooks')).body.map((w: any) => w.id)).toEqual([mine.body.id]);
    expect((await other.get('/webhooks')).body.map((w: any) => w.id)).toEqual([theirs.body.id]);

    // An account key cannot delete the global webhook nor another account's.
    expect((await first.delete(`/webhooks/${global.body.id}`)).status).toBe(404);
    expect((await first.delete(`/webhooks/${theirs.body.id}`)).status).toBe(404);
    // The merchant-wide key can delete any of its merchant's.
    expect((await wide.delete(`/webhooks/${theirs.body.id}`)).status).toBe(204);
    expect((await other.get('/webhooks')).body).toEqual([]);
  });

  it('permissions: POST and DELETE need account:write, GET needs account:read; POST needs the signature', async () => {
    const reader = await merchantWithKey(s, { permissions: ['account:read'] });
    const res = await create(reader, { url: 'https://x.example.com/', events: ['pix.charge.paid'] });
    expect([res.status, res.body]).toEqual([403, { error: 'forbidden', message: 'API key lacks permission: account:write' }]);
    const del = await reader.client.delete('/webhooks/6a2f41a3-c54c-4ce8-92d2-0324e1c32e22');
    expect([del.status, del.body]).toEqual([403, { error: 'forbidden', message: 'API key lacks permission: account:write' }]);
    const writer = await merchantWithKey(s, { permissions: ['account:write'] });
    const list = await writer.client.get('/webhooks');
    expect([list.status, list.body]).toEqual([403, { error: 'forbidden', message: 'API key lacks permission: account:read' }]);
    const unsigned = await create(m, { url: 'https://x.example.com/', events: ['pix.charge.paid'] }, { sign: false });
    expect([unsigned.status, unsigned.body]).toEqual([401, { worked: false, detail: 'Missing HMAC header' }]);
    const v2 = await create(m, { url: 'https://v2.example.com/', events: ['pix.charge.paid'] }, { sign: 'v2' });
    expect(v2.status).toBe(201);
  });

  it('GET /webhooks/events: the catalog for any authenticated key, with the alias', async () => {
    const any = await merchantWithKey(s, { permissions: ['pix:read'] });
    const res = await any.client.get('/webhooks/events');
    expect(res.status).toBe(200);
    expect(res.body).toHaveLength(EVENT_CATALOG.length);
    expect(res.body[0]).toEqual({ event: 'pix.charge.created', status: 'created', description: 'QR code generated or cash-in started', firing: 'active', alias_of: null });
    expect(res.body.find((e: any) => e.event === 'pix.return.received')).toEqual({
      event: 'pix.return.received',
      status: 'returned',
      description: 'Subscription alias of pix.payout.returned',
      firing: 'alias',
      alias_of: 'pix.payout.returned',
    });
    expect(res.body.find((e: any) => e.event === 'webhook.test')).toMatchObject({ status: 'test', firing: 'manual' });
    expect(res.body.find((e: any) => e.event === 'pix.charge.cancelled')).toMatchObject({ firing: 'subscribable' });
    const anonymous = await fetch(`${s.url}/api/external/webhooks/events`);
    expect(anonymous.status).toBe(401);
  });

  it('X-Key-Case: camelCase reads allowInsecure and answers camelCase keys', async () => {
    const fx = await merchantWithKey(s);
    const res = await fx.client.post('/webhooks', { url: 'http://camel.example.com/', events: ['pix.charge.paid'], allowInsecure: true }, { camelCase: true });
    expect(res.status).toBe(201);
    expect(Object.keys(res.body)).toEqual(['worked', 'id', 'url', 'events', 'secret', 'description', 'isActive', 'createdAt']);
    const list = await fx.client.get('/webhooks', { camelCase: true });
    expect(list.body[0]).toMatchObject({ allowInsecure: true, accountId: fx.accountId, isActive: true });
  });

  it('Idempotency-Key: a repeated POST registers once and replays the same answer', async () => {
    const fx = await merchantWithKey(s);
    const body = { url: 'https://idem.example.com/', events: ['pix.charge.paid'] };
    const first = await create(fx, body, { idempotencyKey: 'register-webhook-1' });
    const second = await create(fx, body, { idempotencyKey: 'register-webhook-1' });
    expect(second.status).toBe(201);
    expect(second.text).toBe(first.text);
    expect(second.headers.get('x-idempotent-replay')).toBe('true');
    expect((await fx.client.get('/webhooks')).body).toHaveLength(1);
  });

  it('a merchant may hold at most 25 webhooks', async () => {
    const fx = await merchantWithKey(s);
    for (let i = 0; i < 25; i++) expect((await create(fx, { url: `https://n${i}.example.com/`, events: ['pix.charge.paid'] })).status).toBe(201);
    const res = await create(fx, { url: 'https://one-more.example.com/', events: ['pix.charge.paid'] });
    expect([res.status, res.body]).toEqual([422, { errors: { unprocessable_entity: 'webhook limit reached: at most 25 webhooks per merchant' } }]);
    const list = (await fx.client.get('/webhooks')).body;
    expect((await fx.client.delete(`/webhooks/${list[0].id}`)).status).toBe(204);
    expect((await create(fx, { url: 'https://one-more.example.com/', events: ['pix.charge.paid'] })).status).toBe(201);
  });
});
