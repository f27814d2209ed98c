import { Ajv2020 } from 'ajv/dist/2020.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openApiDocument } from '../src/openapi/document.js';
import { readSse } from '@pixgate/sdk';
import { addPixKey, merchantWithKey } from './helpers/client.js';
import { BACKENDS } from './helpers/db.js';
import { startTestServer, type TestServer } from './helpers/server.js';
import { emit } from './webhooks/helpers.js';

/**
 * GET /api/external/events/stream answers text/event-stream on the raw socket, which the contract
 * check (an onSend hook) never sees. The document states the stream's media type and, as
 * `x-itemSchema`, the shape of each event with `data` as JSON whose `contentSchema` is the event;
 * here real streamed events are checked against exactly that schema.
 */
type Json = Record<string, any>;
const DOC_ID = 'https://pixgate.invalid/openapi.json';
const STREAM = '/paths/~1api~1external~1events~1stream/get/responses/200/content/text~1event-stream';

function pointer(doc: Json, p: string): any {
  return p.split('/').slice(1).reduce((node, part) => node?.[part.replace(/~1/g, '/').replace(/~0/g, '~')], doc);
}

/** The first `count` events of the stream (the SDK's Server-Sent Events parser). */
async function readEvents(res: Response, count: number): Promise<Array<{ id?: string; event?: string; data: string }>> {
  const out: Array<{ id?: string; event?: string; data: string }> = [];
  for await (const msg of readSse(res.body!)) {
    if (!msg.data) continue; // the opening message: only the starting cursor (`id:`)
    out.push(msg);
    if (out.length === count) break;
  }
  return out;
}

describe('the event stream in the OpenAPI document', () => {
  const doc = openApiDocument() as Json;
  const ajv = new Ajv2020({ strict: false, allErrors: true, validateFormats: false });
  ajv.addSchema(doc, DOC_ID);

  it('states text/event-stream with the schema of each event (data: FeedEvent JSON)', () => {
    const media = pointer(doc, STREAM);
    expect(media).toBeDefined();
    expect(media.schema).toEqual({ type: 'string' });
    const item = media['x-itemSchema'];
    expect(item.required).toEqual(['id', 'event', 'data']);
    expect(item.properties.data.contentMediaType).toBe('application/json');
    expect(item.properties.data.contentSchema).toEqual({ $ref: '#/components/schemas/FeedEvent' });
    // /metrics is stated as text too.
    expect(Object.keys(pointer(doc, '/paths/~1metrics/get/responses/200/content'))).toEqual(['text/plain']);
  });

  describe.each(BACKENDS)('on %s', (backend) => {
    let s: TestServer;
    beforeAll(async () => {
      s = await startTestServer({ backend, workers: false });
    });
    afterAll(async () => s?.close());

    it('every streamed event validates against the document’s event schema', async () => {
      const m = await merchantWithKey(s);
      // An event made by the API itself (a charge), and catalogue events with their payloads.
      await addPixKey(s, m.accountId, 'evp');
      const charge = await m.client.post('/pix/cash-in', { amount: 1500, description: 'sse contract' });
      expect(charge.status).toBe(201);
      await emit(s.database.db, { merchantId: m.merchantId, accountId: m.accountId, subject: 'sse-1' });
      await emit(s.database.db, { merchantId: m.merchantId, accountId: m.accountId, subject: 'sse-2', event: 'pix.payout.returned' });

      const ctl = new AbortController();
      const res = await fetch(`${s.url}/api/external/events/stream?after=0`, { headers: { authorization: m.client.authHeader() }, signal: ctl.signal });
      expect(res.status).toBe(200);
      const declared = Object.keys(pointer(doc, STREAM.slice(0, STREAM.lastIndexOf('/'))));
      expect(declared).toContain(res.headers.get('content-type')!.split(';')[0]);
      const events = await readEvents(res, 3);
      ctl.abort();
      expect(events.length).toBe(3);

      const item = ajv.compile({ $ref: `${DOC_ID}#${STREAM}/x-itemSchema` });
      const data = ajv.compile({ $ref: `${DOC_ID}#${STREAM}/x-itemSchema/properties/data/contentSchema` });
      for (const e of events) {
        expect(item(e), JSON.stringify(item.errors)).toBe(true);
        const value = JSON.parse(e.data);
        expect(data(value), JSON.stringify(data.errors)).toBe(true);
        expect(e.id).toBe(String(value.sequence));
        expect(e.event).toBe(value.event);
      }
      expect(events.map((e) => JSON.parse(e.data).subject)).toEqual(expect.arrayContaining(['sse-1', 'sse-2']));
      // The schema is closed: an event with a field the document does not state would fail.
      expect(data({ ...JSON.parse(events[0]!.data), extra: 1 })).toBe(false);
    });
  });
});
