import { validate } from '@readme/openapi-parser';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openApiDocument, openApiPath } from '../src/openapi/document.js';
import { installContractCheck, takeContractViolations } from './helpers/contract.js';
import { startTestServer, TEST_ADMIN_TOKEN, type TestServer } from './helpers/server.js';
import type { FastifyInstance } from 'fastify';

/** The OpenAPI document: valid, served, and covering exactly the routes the server has. */
describe('OpenAPI document', () => {
  let server: TestServer;
  const routes: string[] = [];
  beforeAll(async () => {
    server = await startTestServer({ workers: false });
  });
  afterAll(async () => server?.close());

  it('passes the OpenAPI 3.1 validator (@readme/openapi-parser)', async () => {
    const doc = structuredClone(openApiDocument());
    const result = await validate(doc as never);
    expect('errors' in result ? result.errors : []).toEqual([]);
    expect(result.valid).toBe(true);
  });

  it('is served at /openapi.json, rendered at /docs from the pinned Redoc bundle', async () => {
    const res = await fetch(`${server.url}/openapi.json`);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toContain('application/json');
    expect(await res.json()).toEqual(JSON.parse(JSON.stringify(openApiDocument())));
    const page = await fetch(`${server.url}/docs`);
    expect(page.status).toBe(200);
    const html = await page.text();
    expect(html).toContain('spec-url="/openapi.json"');
    expect(html).toContain('src="/docs/redoc.standalone.js"');
    const bundle = await fetch(`${server.url}/docs/redoc.standalone.js`);
    expect(bundle.status).toBe(200);
    expect((await bundle.text()).length).toBeGreaterThan(100_000);
  });

  it('documents every route the server serves, and only those', async () => {
    const { startServer } = await import('../src/server.js');
    const { parseConfig } = await import('../src/config.js');
    const { openTestDatabase } = await import('./helpers/db.js');
    const pino = (await import('pino')).default;
    const db = await openTestDatabase('pglite');
    const other = await startServer(parseConfig({ PORT: '0', HOST: '127.0.0.1', ADMIN_TOKEN: TEST_ADMIN_TOKEN, LOG_LEVEL: 'silent' }), {
      db: db.db,
      ownsDatabase: false,
      log: pino({ level: 'silent' }),
      print: () => {},
      seed: false,
      workers: false,
      onApp: (app: FastifyInstance) =>
        app.addHook('onRoute', (r) => {
          for (const m of [r.method].flat()) if (m !== 'HEAD') routes.push(`${m} ${openApiPath(r.url)}`);
        }),
    });
    await other.stop();
    await db.close();
    // Not part of the JSON API: the document itself, its Redoc page, the merchant portal and the operator console (HTML forms).
    const served = new Set(routes.filter((r) => !/ \/(openapi\.json|docs|portal|console)(\/|$)/.test(r) && !r.endsWith('*')));
    const doc = openApiDocument() as { paths: Record<string, Record<string, unknown>> };
    const documented = new Set(Object.entries(doc.paths).flatMap(([p, ops]) => Object.keys(ops).map((m) => `${m.toUpperCase()} ${p}`)));
    expect([...served].filter((r) => !documented.has(r))).toEqual([]);
    expect([...documented].filter((r) => !served.has(r))).toEqual([]);
    expect(documented.size).toBeGreaterThan(50);
  });

  it('states the answers every route can give before routing (found by the OpenAPI fuzzer)', async () => {
    const doc = openApiDocument() as { paths: Record<string, Record<string, { responses: Record<string, unknown> }>> };
    // A malformed URL is refused on the health routes too, and headers over 16 KiB on any route.
    const bad = await fetch(`${server.url}/healthz?x=%00`);
    expect(bad.status).toBe(400);
    expect(await bad.json()).toEqual({ errors: { bad_request: expect.any(String) } });
    expect(Object.keys(doc.paths['/healthz']!.get!.responses)).toContain('400');
    const { request } = await import('node:http');
    const status = await new Promise<number>((resolve, reject) => {
      const req = request(`${server.url}/api/external/transactions/${'x'.repeat(20_000)}`, (res) => {
        res.resume();
        resolve(res.statusCode!);
      });
      req.on('error', reject);
      req.end();
    });
    expect(status).toBe(431);
    // Under the API Pix façade, the same refusal is an RFC 7807 problem.
    const pix = await new Promise<{ status: number; type: string; body: string }>((resolve, reject) => {
      const req = request(`${server.url}/api/pix/v2/pix/${'x'.repeat(20_000)}`, (res) => {
        let body = '';
        res.on('data', (c: Buffer) => (body += c.toString()));
        res.on('end', () => resolve({ status: res.statusCode!, type: String(res.headers['content-type']), body }));
      });
      req.on('error', reject);
      req.end();
    });
    expect(pix.status).toBe(431);
    // A malformed URL under the payload reads (/qr/v2/…) names no location: the façade's 404
    // problem, as is an unknown path there (found by the OpenAPI fuzzer: it was a business 400).
    for (const [url, want] of [[`/qr/v2/cobv/x%00y?DPP=2026-01-01`, 404], ['/qr/v2/cobv/a/b/c', 404]] as const) {
      const res = await fetch(`${server.url}${url}`);
      expect(res.status, url).toBe(want);
      expect(res.headers.get('content-type'), url).toContain('application/problem+json');
      expect(await res.json(), url).toMatchObject({ status: want, type: expect.stringMatching(/^https:\/\/pix\.bcb\.gov\.br\/api\/v2\/error\//) });
    }
    expect(pix.type).toContain('application/problem+json');
    expect(JSON.parse(pix.body)).toMatchObject({ type: 'https://pix.bcb.gov.br/api/v2/error/RequisicaoInvalida', status: 431, detail: 'Request headers are too large' });
    for (const [path, ops] of Object.entries(doc.paths)) for (const [m, op] of Object.entries(ops)) expect(Object.keys(op.responses), `${m} ${path}`).toContain('431');
  });

  it('a POST without a body but with a Content-Type the parser cannot read: 415 in the business shape, as documented (found by the HTTP fuzzer)', async () => {
    // Stage 1 (shape 1) judges the Content-Type of a request with a body; without one, Fastify's
    // parser refuses a media type it cannot parse, in the business shape. The contract check of
    // this test server fails the test if the document does not list that answer.
    const { merchantWithKey } = await import('./helpers/client.js');
    const m = await merchantWithKey(server);
    const { request } = await import('node:http');
    const answer = await new Promise<{ status: number; body: string }>((resolve, reject) => {
      const req = request(
        `${server.url}/api/external/pix/cash-in`,
        { method: 'POST', headers: { authorization: m.client.authHeader(), 'content-type': '"application/json"', 'content-length': '0' } },
        (res) => {
          let body = '';
          res.on('data', (c: Buffer) => (body += c.toString()));
          res.on('end', () => resolve({ status: res.statusCode!, body }));
        },
      );
      req.on('error', reject);
      req.end();
    });
    expect(answer.status).toBe(415);
    expect(JSON.parse(answer.body)).toEqual({ errors: { unsupported_media_type: 'Content-Type must be application/json' } });
  });

  it('an empty query parameter is read as absent, and the document says so (found by the HTTP fuzzer: GET /transactions?status=)', async () => {
    // The contract check of this test server fails the test if the document refuses a value the
    // server took; every filter is asked empty at once and one by one.
    const { merchantWithKey } = await import('./helpers/client.js');
    const m = await merchantWithKey(server);
    const lists: Record<string, string[]> = {
      '/statement': ['status', 'type', 'page', 'per_page', 'date_from', 'date_to'],
      '/transactions': ['status', 'type', 'page', 'per_page', 'date_from', 'date_to'],
      '/med': ['status', 'end_to_end_id', 'page', 'per_page', 'date_from', 'date_to'],
      '/events': ['after', 'limit', 'type'],
    };
    for (const [path, params] of Object.entries(lists)) {
      for (const query of [params.map((p) => `${p}=`).join('&'), ...params.map((p) => `${p}=`)]) {
        const res = await m.client.get(`${path}?${query}`);
        expect(res.status, `${path}?${query}`).toBe(200);
      }
    }
    const doc = openApiDocument() as { paths: Record<string, Record<string, { parameters?: { name: string; in: string; schema: unknown }[] }>> };
    const medStatus = doc.paths['/api/external/med']!.get!.parameters!.find((p) => p.name === 'status')!;
    expect(JSON.stringify(medStatus.schema)).toContain('""');
  });

  it('the contract check catches an answer outside the document', async () => {
    takeContractViolations();
    // A documented route asked with a status the document does not list: the check records it.
    const app = (await import('fastify')).default();
    installContractCheck(app);
    app.get('/healthz', async (_req, reply) => reply.code(418).send({ status: 'teapot' }));
    await app.inject({ method: 'GET', url: '/healthz' });
    await app.close();
    const found = takeContractViolations();
    expect(found.join('\n')).toContain('GET /healthz → 418: status 418 is not documented');
  });
});
