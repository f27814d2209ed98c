import { randomBytes } from 'node:crypto';
import fc from 'fast-check';
import { Agent, request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { signV1, signV2 } from '../../src/auth/hmac.js';
import { canonicalize } from '../../src/lib/canonicalJson.js';
import { systemClock } from '../../src/lib/clock.js';
import { boletoInput, centralClient } from '../boleto/helpers.js';
import { addPixKey, merchantWithKey, type MerchantFixture } from '../helpers/client.js';
import { validCnpj, validCpf } from '../helpers/fixtures.js';
import { expectLedgerConsistent, foreignKey, SIM_FAST } from '../helpers/pix.js';
import { startTestServer, TEST_ADMIN_TOKEN, type TestServer } from '../helpers/server.js';
import { errorShapeProblem, type Api } from './shapes.js';

/**
 * Issue 11, the fuzzer: random requests over real HTTP (keep-alive, concurrent) against one real
 * server, on every route of the external, central, admin and sandbox APIs (read from the router
 * itself): random JSON bodies (prototype-named keys, deep nesting, huge strings, unicode, every
 * JSON number spelling, wrong types), random headers (content types, key case, signature versions
 * — most external POSTs correctly signed v1 or v2 so they reach the handlers —, idempotency keys,
 * X-Forwarded-For through TRUSTED_PROXIES) and random paths and queries (encodings, malformed
 * percent-encoding, traversal, very long).
 *
 * Properties: no answer is 5xx; every error answer of an API is one of its documented shapes
 * (./shapes.ts); every central answer carries X-RateLimit-*; the ledger sums to zero afterwards.
 *
 * FUZZ_RUNS sets the number of requests (default 20,000; `npm run fuzz` runs 100,000).
 */
const TOTAL = Number(process.env.FUZZ_RUNS ?? 20_000);
const CONCURRENCY = 24;
const SEED = process.env.FUZZ_SEED !== undefined ? Number(process.env.FUZZ_SEED) : Date.now() % 2 ** 31;

interface Route {
  api: Api;
  method: string;
  path: string;
}

/** Every route of the app, from Fastify's route tree (`printRoutes({commonPrefix: false})`). */
function routesOf(tree: string): Route[] {
  const stack: string[] = [];
  const routes: Route[] = [];
  for (const line of tree.split('\n')) {
    const m = /^((?:[│ ] {3})*)[├└]── (\S+)(?: \(([^)]+)\))?$/.exec(line);
    if (!m) continue;
    const depth = m[1]!.length / 4;
    stack[depth] = (depth > 0 ? stack[depth - 1]! : '') + m[2]!;
    stack.length = depth + 1;
    for (const method of (m[3] ?? '').split(', ').filter(Boolean)) {
      const path = stack[depth]!;
      const api: Api = path.startsWith('/api/external') ? 'external' : path.startsWith('/api/v1/central') ? 'central' : path.startsWith('/api/admin') ? 'admin' : path.startsWith('/api/sandbox') ? 'sandbox' : 'other';
      routes.push({ api, method, path });
    }
  }
  return routes;
}

/** A raw JSON number text in a JSON value: JSON.stringify writes it as this marker, replaced after. */
const RAW = (text: string) => `\u0000raw:${text}\u0000`;
const jsonText = (value: unknown) => JSON.stringify(value).replace(/"\\u0000raw:([^"\\]*)\\u0000"/g, '$1');

const PROTO_KEYS = ['__proto__', 'constructor', 'prototype', 'toString', 'valueOf', 'hasOwnProperty', 'isPrototypeOf', '__defineGetter__'];
const FIELD_NAMES = ['amount', 'pix_key', 'pixKey', 'pix_key_type', 'emv', 'description', 'external_id', 'externalId', 'original_transaction_id', 'cpf', 'url', 'events', 'account_id', 'merchant_id', 'type', 'key', 'name', 'document', 'boleto', 'amount_cents', 'due_date', 'text', 'reason', 'delay_ms', 'drop', 'permissions', 'ip_whitelist', 'status', 'expires_in'];

const numberText = fc.oneof(
  fc.constantFrom('0', '-0', '1', '100', '100.0', '1e2', '1E2', '1e+2', '1E-2', '0.1', '1.5', '-1', '99.99999999999999999', '100.00000000000000001',
    '100000000000', '100000000001', '9007199254740991', '9007199254740993', '12345678901234567890', '1e21', '1e308', '1e400', '-1e400', '5e-324', '0.0', '-0.0'),
  fc.integer({ min: -1_000_000, max: 2_000_000_000 }).map(String),
  fc.double({ noNaN: true, noDefaultInfinity: true }).map((d) => JSON.stringify(d)),
).map(RAW);

const text = fc.oneof(
  fc.string({ maxLength: 12 }),
  fc.string({ unit: 'grapheme', maxLength: 8 }),
  fc.string({ unit: 'binary', maxLength: 8 }),
  fc.constantFrom('', ' ', '\u0000', '\ud800', '\udfff', '😀', '\u2028', '../../etc/passwd', '<script>', "'; DROP TABLE transactions; --", '%E0%A4%A', '+5511987654321', '11 98765-4321', '529.982.247-25', 'https://printer.local../h', 'https://example.com:0/h', 'pix.payout.confirmed'),
  fc.integer({ min: 1, max: 20_000 }).map((n) => 'x'.repeat(n)),
);

const key = fc.oneof({ weight: 3, arbitrary: fc.constantFrom(...FIELD_NAMES) }, { weight: 2, arbitrary: fc.constantFrom(...PROTO_KEYS) }, { weight: 1, arbitrary: fc.string({ maxLength: 6 }) });

const json = fc.letrec<{ value: unknown; array: unknown[]; object: Record<string, unknown> }>((tie) => ({
  value: fc.oneof(
    { maxDepth: 4, depthSize: 'small' },
    fc.constantFrom(null, true, false),
    numberText,
    text,
    tie('array'),
    tie('object'),
  ),
  array: fc.array(tie('value'), { maxLength: 4 }),
  object: fc.array(fc.tuple(key, tie('value')), { maxLength: 5 }).map((entries) => {
    const o = Object.create(null) as Record<string, unknown>;
    for (const [k, v] of entries) Object.defineProperty(o, k, { value: v, enumerable: true, writable: true, configurable: true });
    return o;
  }),
}));
const jsonValue = json.value as fc.Arbitrary<unknown>;

interface Context {
  s: TestServer;
  m: MerchantFixture;
  other: MerchantFixture;
  centralKey: string;
  payeeKey: string;
  holdKey: string;
}

/** Plausible bodies per route, mutated below: they reach the business rules and move money. */
function baseBody(c: Context, route: Route): fc.Arbitrary<Record<string, unknown>> {
  const amount = fc.oneof(fc.integer({ min: 1, max: 5_000 }), numberText);
  const p = route.path;
  if (p.endsWith('/pix/cash-out')) return fc.record({ amount, pix_key: fc.constantFrom(c.payeeKey, c.holdKey, '+5511987654321', '11 98765-4321', validCpf()), description: text });
  if (p.endsWith('/pix/refund')) return fc.record({ original_transaction_id: fc.constantFrom('PIXIN0', 'x'), amount });
  if (p.endsWith('/cpf/validate')) return fc.record({ cpf: fc.constantFrom('52998224725', '529.982.247-25', '11111111111', '1') });
  if (p.endsWith('/pix/cash-in')) return fc.record({ amount, expires_in: fc.integer({ min: 0, max: 100_000 }) });
  if (p === '/api/external/webhooks') return fc.record({ url: fc.constantFrom('https://example.com/h', 'https://printer.local../h', 'http://127.0.0.1/h'), events: fc.constant(['pix.payout.confirmed']) });
  if (p.endsWith('/tef/transfers')) return fc.record({ amount, account_id: fc.constant(c.other.accountId), from_account_id: fc.constant(c.m.accountId), to_account_id: fc.constant(c.other.accountId) });
  if (p.endsWith('/defense')) return fc.record({ text });
  if (p.endsWith('/merchants')) return fc.record({ name: text, document: fc.constant(validCnpj()) });
  if (p.endsWith('/deposits')) return fc.record({ amount, description: text });
  if (p.endsWith('/pix-keys')) return fc.record({ account_id: fc.constant(c.m.accountId), type: fc.constantFrom('phone', 'email', 'evp', 'cpf'), key: text });
  if (p.endsWith('/central-keys')) return fc.record({ name: text });
  if (p.endsWith('/api-keys')) return fc.record({ merchant_id: fc.constant(c.m.merchantId), permissions: fc.constant(['account:read']), ip_whitelist: fc.constant(['127.0.0.1']) });
  if (p.endsWith('/dict/keys')) return fc.record({ key: text, type: fc.constantFrom('phone', 'email', 'evp'), name: text, document: fc.constant(validCpf()), ispb: fc.constant('18236120') });
  if (p.endsWith('/pix/inbound')) return fc.record({ account_id: fc.constant(c.m.accountId), amount });
  if (p.endsWith('/boletos')) return fc.record({ boleto: fc.constant(boletoInput(systemClock)).chain((b) => fc.record({ ...Object.fromEntries(Object.entries(b).map(([k, v]) => [k, fc.constant(v)])), amount_cents: amount })) });
  if (p.endsWith('/pay') || p.endsWith('/return')) return fc.record({ amount_cents: amount, amount });
  return fc.constant({});
}

function bodyText(c: Context, route: Route): fc.Arbitrary<string | Buffer> {
  return fc.oneof(
    { weight: 6, arbitrary: fc.tuple(baseBody(c, route), fc.array(fc.tuple(key, jsonValue), { maxLength: 3 })).map(([base, extra]) => {
      const o = Object.create(null) as Record<string, unknown>;
      for (const [k, v] of Object.entries(base)) o[k] = v;
      for (const [k, v] of extra) Object.defineProperty(o, k, { value: v, enumerable: true, writable: true, configurable: true });
      return jsonText(o);
    }) },
    { weight: 2, arbitrary: jsonValue.map(jsonText) },
    { weight: 1, arbitrary: fc.integer({ min: 1, max: 5_000 }).map((d) => `${'['.repeat(d)}${']'.repeat(d)}`) },
    { weight: 1, arbitrary: fc.integer({ min: 1, max: 400 }).map((d) => `${'{"a":'.repeat(d)}1${'}'.repeat(d)}`) },
    { weight: 1, arbitrary: fc.constantFrom('', ' ', '{', '{"a":}', '{"a":1,}', 'null', '"x"', '[]', '{"a":NaN}', '{"a":01}', '{"a":1e}', 'a=1&b=2', '\ufeff{}', '{"a":"\\ud800"}', '{"a":"\\x"}') },
    { weight: 1, arbitrary: fc.uint8Array({ maxLength: 64 }).map((b) => Buffer.from(b)) },
    { weight: 1, arbitrary: fc.integer({ min: 0, max: 19 }).map((n) => (n === 0 ? `{"a":"${'y'.repeat(1024 * 1024)}"}` : `{"a":"${'y'.repeat(n * 1000)}"}`)) },
  );
}

const segment = fc.oneof(
  fc.constantFrom('1', '0', '-1', '99999999999999999999', 'PIXOUT0', 'abc', '..', '.', '%2e%2e', '..%2f..%2fetc', '%E0%A4%A', '%zz', '%', '%00', '%C0%AF', '%F0%9F%98%80', '__proto__', 'constructor', '00000000-0000-4000-8000-000000000000'),
  fc.string({ maxLength: 10 }).map(encodeURIComponent),
  fc.integer({ min: 100, max: 6_000 }).map((n) => 'a'.repeat(n)),
);

function pathFor(route: Route): fc.Arbitrary<string> {
  const params = route.path.split('/').map((part) => (part.startsWith(':') ? segment : fc.constant(part)));
  return fc.oneof(
    { weight: 8, arbitrary: fc.tuple(...params).map((parts) => parts.join('/')) },
    { weight: 1, arbitrary: fc.tuple(fc.constant(route.path.split('/').slice(0, 3).join('/')), fc.array(segment, { minLength: 1, maxLength: 4 })).map(([prefix, rest]) => `${prefix}/${rest.join('/')}`) },
    { weight: 1, arbitrary: fc.constantFrom(`${route.path}/`, `${route.path}//x`, `${route.path}/../../api/admin/merchants`, route.path.toUpperCase(), `${route.path}%2F`) },
  );
}

const query = fc.oneof(
  { weight: 3, arbitrary: fc.constant('') },
  { weight: 2, arbitrary: fc.array(fc.tuple(fc.constantFrom('page', 'per_page', 'perPage', 'status', 'type', 'date_from', 'date_to', '__proto__', 'constructor', 'limit', 'a[b]', 'x'), fc.oneof(segment, fc.constantFrom('1', '2', '100', '101', '1e2', '1.0', 'settled', 'processing', '2024-02-30', '2026-01-01'))), { minLength: 1, maxLength: 4 }).map((pairs) => `?${pairs.map(([k, v]) => `${encodeURIComponent(k)}=${v}`).join('&')}`) },
);

const contentType = fc.constantFrom('application/json', 'application/json; charset=utf-8', 'APPLICATION/JSON', 'text/plain', 'application/x-www-form-urlencoded', 'multipart/form-data; boundary=x', 'application/json;;', '', undefined);
const publicIp = fc.oneof(fc.ipV4(), fc.ipV6(), fc.constantFrom('127.0.0.1', '::1', 'garbage', '1.2.3.4, 127.0.0.1', ''));

interface FuzzRequest {
  route: Route;
  method: string;
  path: string;
  headers: Record<string, string>;
  body: string | Buffer | undefined;
}

function requestFor(c: Context, routes: Route[]): fc.Arbitrary<FuzzRequest> {
  return fc.constantFrom(...routes).chain((route) =>
    fc
      .record({
        route: fc.constant(route),
        method: fc.oneof({ weight: 9, arbitrary: fc.constant(route.method) }, { weight: 1, arbitrary: fc.constantFrom('GET', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS', 'HEAD') }),
        path: pathFor(route),
        query,
        body: bodyText(c, route),
        contentType,
        auth: fc.constantFrom('good', 'good', 'good', 'good', 'bad', 'none'),
        sign: fc.constantFrom('v1', 'v2', 'v2', 'v1-explicit', 'wrong', 'none', 'v3'),
        camel: fc.boolean(),
        idem: fc.oneof(fc.constant(undefined), fc.string({ minLength: 1, maxLength: 300 }).map((s) => s.replace(/[^\x21-\x7e]/g, 'k'))),
        xff: fc.option(publicIp, { nil: undefined }),
        timestampSkew: fc.constantFrom(0, 0, 0, 300, -300, 301, -301, 100_000),
      })
      .map((g): FuzzRequest => {
        const hasBody = g.method !== 'GET' && g.method !== 'HEAD' && g.method !== 'OPTIONS' && !(g.method === 'DELETE' && g.body === '');
        const body = hasBody ? g.body : undefined;
        const headers: Record<string, string> = {};
        if (body !== undefined && g.contentType !== undefined) headers['content-type'] = g.contentType;
        if (g.camel) headers['x-key-case'] = 'camelCase';
        if (g.idem !== undefined) headers['idempotency-key'] = g.idem;
        if (g.xff !== undefined) headers['x-forwarded-for'] = g.xff;
        const api = route.api;
        if (api === 'external' && g.auth !== 'none') headers.authorization = g.auth === 'good' ? c.m.client.authHeader() : 'ApiKey nope:nope';
        if ((api === 'admin' || api === 'sandbox') && g.auth !== 'none') headers.authorization = g.auth === 'good' ? `Bearer ${TEST_ADMIN_TOKEN}` : 'Bearer wrong-token-0123456789';
        if (api === 'central' && g.auth !== 'none') headers['x-api-key'] = g.auth === 'good' ? c.centralKey : 'ck_wrong';
        if (api === 'external' && body !== undefined && g.method === 'POST') {
          const textBody = typeof body === 'string' ? body : body.toString('utf8');
          let canonical: string | null = null;
          try {
            canonical = canonicalize(textBody);
          } catch {
            canonical = null;
          }
          const secret = c.m.client.clientSecret;
          if (g.sign === 'v1' || g.sign === 'v1-explicit') {
            if (g.sign === 'v1-explicit') headers['x-signature-version'] = '1';
            headers.hmac = canonical === null ? 'a'.repeat(128) : signV1(secret, canonical);
          } else if (g.sign === 'v2') {
            const timestamp = String(Math.floor(Date.now() / 1000) + g.timestampSkew);
            const nonce = randomBytes(12).toString('hex');
            const idempotencyKey = headers['idempotency-key'] ?? `fuzz-${randomBytes(8).toString('hex')}`;
            Object.assign(headers, { 'x-signature-version': '2', 'x-request-timestamp': timestamp, 'x-request-nonce': nonce, 'idempotency-key': idempotencyKey });
            const signedPath = g.path.split('?')[0]!;
            headers.hmac = canonical === null ? 'b'.repeat(128) : signV2(secret, { timestamp, nonce, method: 'POST', path: signedPath, idempotencyKey, canonicalBody: canonical });
          } else if (g.sign === 'wrong') headers.hmac = 'c'.repeat(128);
          else if (g.sign === 'v3') {
            headers['x-signature-version'] = '3';
            headers.hmac = 'd'.repeat(128);
          }
        }
        return { route, method: g.method, path: `${g.path}${g.query}`, headers, body };
      }),
  );
}

interface Outcome {
  status: number;
  problem: string | null;
}

async function send(agent: Agent, origin: string, r: FuzzRequest): Promise<Outcome> {
  const res = await request(`${origin}${r.path}`, {
    method: r.method as 'GET',
    headers: r.headers,
    body: r.body,
    dispatcher: agent,
    headersTimeout: 60_000,
    bodyTimeout: 60_000,
  });
  const raw = await res.body.text();
  const status = res.statusCode;
  const where = `${r.method} ${r.path.slice(0, 200)} -> ${status} ${raw.slice(0, 300)}`;
  if (status >= 500) return { status, problem: `5xx: ${where}` };
  // The API a request lands in is decided by the prefix of the path sent (the client resolves dot
  // segments), whatever route it was drawn from.
  const path = new URL(r.path, origin).pathname;
  const api: Api = path.startsWith('/api/external/') || path === '/api/external' ? 'external' : path.startsWith('/api/v1/central/') ? 'central' : path.startsWith('/api/admin/') ? 'admin' : path.startsWith('/api/sandbox/') ? 'sandbox' : 'other';
  // Refused by Node's HTTP parser before any API is known (headers over 16 KB): shape 4 everywhere.
  if (status === 431) {
    if (r.method === 'HEAD') return { status, problem: null };
    let body: unknown;
    try {
      body = JSON.parse(raw);
    } catch {
      return { status, problem: `431 body is not JSON: ${where}` };
    }
    // The API Pix façade answers RFC 7807 problems, there too.
    if (path === '/api/pix' || path.startsWith('/api/pix/')) {
      const p = body as { type?: unknown; status?: unknown };
      return { status, problem: typeof p.type === 'string' && p.status === 431 && String(res.headers['content-type']).startsWith('application/problem+json') ? null : `431 is not a problem: ${where}` };
    }
    const problem = errorShapeProblem('admin', status, body);
    return { status, problem: problem ? `${problem}: ${where}` : null };
  }
  if (api === 'central' && res.headers['x-ratelimit-limit'] === undefined) return { status, problem: `central answer without X-RateLimit-Limit: ${where}` };
  if (status >= 400 && r.method !== 'HEAD' && api !== 'other') {
    let body: unknown;
    try {
      body = JSON.parse(raw);
    } catch {
      return { status, problem: `error body is not JSON: ${where}` };
    }
    const problem = errorShapeProblem(api, status, body);
    if (problem) return { status, problem: `${problem}: ${where}` };
    if (status === 429 && res.headers['retry-after'] === undefined) return { status, problem: `429 without Retry-After: ${where}` };
  }
  return { status, problem: null };
}

describe('HTTP fuzzer (issue 11): every route of every API, hostile requests', () => {
  let s: TestServer;
  let c: Context;
  let routes: Route[];
  beforeAll(async () => {
    s = await startTestServer({ backend: 'pglite', env: { ...SIM_FAST, TRUSTED_PROXIES: '127.0.0.1,::1', RAIL_TIMEOUT_MS: '2000' } });
    const m = await merchantWithKey(s, { depositCents: 100_000_000 });
    const other = await merchantWithKey(s, { depositCents: 1_000 });
    await addPixKey(s, m.accountId, 'evp');
    const central = await centralClient(s, { accountId: m.accountId });
    c = { s, m, other, centralKey: central.apiKey, payeeKey: await foreignKey(s), holdKey: await foreignKey(s, { behavior: 'hold' }) };
    routes = routesOf(s.app.printRoutes({ commonPrefix: false })).filter(
      // The event stream never ends by design; the rail stall switch would only slow the run down.
      (r) => !r.path.endsWith('/events/stream') && !r.path.endsWith('/rail/stall'),
    );
  });
  afterAll(async () => s?.close());

  it(`${TOTAL} random requests: no 5xx, every error in its API's documented shape, the ledger at zero`, { timeout: Math.max(900_000, TOTAL * 60) }, async () => {
    expect(routes.filter((r) => r.api === 'external').length).toBeGreaterThan(20);
    for (const api of ['central', 'admin', 'sandbox'] as const) expect(routes.some((r) => r.api === api)).toBe(true);
    const agent = new Agent({ connections: CONCURRENCY, pipelining: 1, keepAliveTimeout: 30_000 });
    const origin = s.url;
    const statuses = new Map<number, number>();
    const problems: string[] = [];
    let sent = 0;
    const started = Date.now();
    try {
      await fc.assert(
        fc.asyncProperty(fc.array(requestFor(c, routes), { minLength: CONCURRENCY, maxLength: CONCURRENCY }), async (batch) => {
          const outcomes = await Promise.all(batch.map((r) => send(agent, origin, r)));
          sent += batch.length;
          for (const o of outcomes) {
            statuses.set(o.status, (statuses.get(o.status) ?? 0) + 1);
            if (o.problem) problems.push(o.problem);
          }
          return outcomes.every((o) => o.problem === null);
        }),
        { numRuns: Math.ceil(TOTAL / CONCURRENCY), seed: SEED, endOnFailure: true },
      );
    } finally {
      await agent.close();
      const seconds = (Date.now() - started) / 1000;
      const byStatus = [...statuses.entries()].sort((a, b) => a[0] - b[0]).map(([k, v]) => `${k}:${v}`).join(' ');
      console.log(`fuzz: ${sent} requests in ${seconds.toFixed(1)} s (${Math.round(sent / seconds)}/s), seed ${SEED}, ${routes.length} routes; statuses ${byStatus}; ${problems.length} problems`);
      for (const p of problems.slice(0, 10)) console.log(`fuzz problem: ${p}`);
    }
    expect(problems).toEqual([]);
    expect(sent).toBeGreaterThanOrEqual(TOTAL);
    await expectLedgerConsistent(s.ctx.db);
  });
});
