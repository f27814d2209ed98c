import { describe, expect, it } from 'vitest';
import { BACKENDS } from '../helpers/db.js';
import { merchantWithKey, type MerchantFixture } from '../helpers/client.js';
import type { TestServer } from '../helpers/server.js';
import { withPipelineServer } from './testRoutes.js';

describe.each(BACKENDS)('pipeline stages 1, 2 and 7 on %s', (backend) => {
  let s: TestServer;
  let m: MerchantFixture;
  withPipelineServer({ backend }, (server, merchant) => {
    s = server;
    m = merchant;
  });

  describe('stage 1, content type', () => {
    it('415 with the shape-1 message and a hint for curl’s form-urlencoded default', async () => {
      const res = await m.client.post('/test/echo', 'a=1', { contentType: 'application/x-www-form-urlencoded', sign: false });
      expect(res.status).toBe(415);
      expect(res.body).toEqual({
        error: {
          status: 415,
          message: 'Unsupported Media Type. Expected Content-Type: application/json',
          hint: 'curl -d sends application/x-www-form-urlencoded by default; add -H "Content-Type: application/json"',
        },
      });
    });

    it('415 for other media types and for a body without Content-Type', async () => {
      for (const type of ['text/plain', 'application/xml', 'application/jsonx']) {
        const res = await m.client.post('/test/echo', '{"a":1}', { contentType: type, sign: false });
        expect(res.status, type).toBe(415);
        expect(res.body.error.message).toBe('Unsupported Media Type. Expected Content-Type: application/json');
        expect(res.body.error.hint).toBe('Send the body as JSON with the header Content-Type: application/json');
      }
      const res = await fetch(`${s.url}/api/external/test/echo`, { method: 'POST', headers: { authorization: m.client.authHeader() }, body: new Uint8Array([123, 125]) });
      expect(res.status).toBe(415);
    });

    it('accepts application/json with parameters and any case', async () => {
      expect((await m.client.post('/test/echo', { a: 1 }, { contentType: 'Application/JSON; charset=utf-8' })).status).toBe(200);
    });

    it('GET and DELETE are not checked', async () => {
      const res = await fetch(`${s.url}/api/external/test/ping`, { headers: { authorization: m.client.authHeader(), 'content-type': 'text/plain' } });
      expect(res.status).toBe(200);
    });
  });

  describe('stage 2, X-Key-Case: camelCase', () => {
    it('reads camelCase body and query keys as snake_case and answers in camelCase', async () => {
      const res = await m.client.post('/test/echo', { pixKey: 'a', nestedObject: { externalId: 'x', list: [{ endToEndId: 'E1' }] } }, { camelCase: true });
      expect(res.status).toBe(200);
      expect(JSON.parse(res.body.receivedJson)).toEqual({ pix_key: 'a', nested_object: { external_id: 'x', list: [{ end_to_end_id: 'E1' }] } });
      // The answer's keys go out in camelCase.
      expect(res.body.receivedBody).toEqual({ pixKey: 'a', nestedObject: { externalId: 'x', list: [{ endToEndId: 'E1' }] } });
      expect(Object.keys(res.body)).toEqual(['worked', 'receivedBody', 'receivedJson']);
      const get = await m.client.get('/test/ping?perPage=5&dateFrom=2026-01-01', { camelCase: true });
      expect(get.body).toEqual({ worked: true, queryJson: JSON.stringify({ per_page: '5', date_from: '2026-01-01' }) });
    });

    it('without the header keys stay snake_case both ways', async () => {
      const res = await m.client.post('/test/echo', { pixKey: 'a' });
      expect(res.body).toEqual({ worked: true, received_body: { pixKey: 'a' }, received_json: '{"pixKey":"a"}' });
    });

    it('the signature covers the body as transmitted (camelCase)', async () => {
      const res = await m.client.post('/test/echo', '{"zKey":1,"aKey":2}', { camelCase: true });
      expect(res.status).toBe(200);
      expect(JSON.parse(res.body.receivedJson)).toEqual({ a_key: 2, z_key: 1 });
    });

    it('error bodies are camelCase too', async () => {
      const k = await merchantWithKey(s, { permissions: [] });
      const res = await k.client.post('/cpf/validate', { cpf: 5 }, { camelCase: true });
      expect(res.status).toBe(403);
      const bad = await m.client.post('/cpf/validate', { cpfNumber: '1' }, { camelCase: true });
      expect(bad.status).toBe(400);
      expect(bad.body).toEqual({ errors: { badRequest: { cpf: ['is required'], cpfNumber: ['is not a permitted field'] } } });
    });
  });

  describe('stage 7, permission', () => {
    it('403 {error: "forbidden", message: "API key lacks permission: <permission>"}', async () => {
      const k = await merchantWithKey(s, { permissions: ['account:read'] });
      const post = await k.client.post('/test/execute', { a: 1 });
      expect(post.status).toBe(403);
      expect(post.body).toEqual({ error: 'forbidden', message: 'API key lacks permission: transfer:write' });
      const get = await k.client.get('/test/ping');
      expect(get.body).toEqual({ error: 'forbidden', message: 'API key lacks permission: statement:read' });
      expect((await k.client.get('/balance')).status).toBe(200);
    });
  });

  describe('unknown routes', () => {
    it('need credentials, then answer 404', async () => {
      const anon = await fetch(`${s.url}/api/external/nope`);
      expect(anon.status).toBe(401);
      const res = await m.client.get('/nope');
      expect(res.status).toBe(404);
      expect(res.body).toEqual({ errors: { not_found: 'route not found' } });
    });
  });
});
