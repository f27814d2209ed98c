import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BACKENDS } from '../helpers/db.js';
import { merchantWithKey, type MerchantFixture } from '../helpers/client.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { emit, waitUntil } from '../webhooks/helpers.js';
import { FEED_HORIZON_MAX_WAIT_SECONDS } from '../../src/events/feed.js';
import { readSse } from '@pixgate/sdk';

/** Server-Sent Events of a fetch response, read by the SDK's parser. */
async function* sse(res: Response) {
  for await (const msg of readSse(res.body!)) if (msg.data) yield msg;
}

describe.each(BACKENDS)('events feed on %s', (backend) => {
  let s: TestServer;
  let m: MerchantFixture;
  beforeAll(async () => {
    s = await startTestServer({ backend, workers: false });
    m = await merchantWithKey(s);
  });
  afterAll(async () => {
    await s?.close();
  });

  it('pages the merchant’s own events in order with a cursor, filters by type (aliases too), and hides other merchants’', async () => {
    const other = await merchantWithKey(s);
    const ids: string[] = [];
    for (let i = 0; i < 5; i++) {
      ids.push(await emit(s.database.db, { merchantId: m.merchantId, accountId: m.accountId, subject: `tx-${i}`, event: i % 2 ? 'pix.payout.returned' : 'pix.charge.paid' }));
    }
    await emit(s.database.db, { merchantId: other.merchantId, accountId: other.accountId, subject: 'theirs' });

    // On a shared PostgreSQL another session's open transaction may hold the horizon for up to 5 s.
    await waitUntil(async () => (await m.client.get('/events')).body.events.length === 5, 10_000, 'the events to be final');
    const all = await m.client.get('/events');
    expect(all.status).toBe(200);
    expect(all.body.events.map((e: { id: string }) => e.id)).toEqual(ids);
    const first = all.body.events[0];
    expect(first).toMatchObject({ event: 'pix.charge.paid', account_id: m.accountId, subject: 'tx-0', payload: { event: 'pix.charge.paid', status: 'paid', amount: 1_000_000 } });
    expect(JSON.parse(first.body)).toEqual(first.payload);
    expect(all.body.has_more).toBe(false);

    const page1 = await m.client.get('/events?limit=2');
    expect(page1.body.events).toHaveLength(2);
    expect(page1.body.has_more).toBe(true);
    const page2 = await m.client.get(`/events?limit=2&after=${page1.body.next_after}`);
    expect(page2.body.events.map((e: { id: string }) => e.id)).toEqual(ids.slice(2, 4));

    const returned = await m.client.get('/events?type=pix.return.received');
    expect(returned.body.events.map((e: { subject: string }) => e.subject)).toEqual(['tx-1', 'tx-3']);
    const both = await m.client.get('/events?type=pix.charge.paid,pix.payout.returned');
    expect(both.body.events).toHaveLength(5);

    expect((await other.client.get('/events')).body.events.map((e: { subject: string }) => e.subject)).toEqual(['theirs']);
  });

  it('refuses bad parameters (400) and keys without account:read (403)', async () => {
    const bad = await m.client.get('/events?after=-1&limit=0&type=boleto.paid');
    expect(bad.status).toBe(400);
    expect(Object.keys(bad.body.errors.bad_request).sort()).toEqual(['after', 'limit', 'type']);
    const weak = await merchantWithKey(s, { permissions: ['pix:read'] });
    expect((await weak.client.get('/events')).status).toBe(403);
    expect((await weak.client.get('/events/stream')).status).toBe(403);
  });

  it('streams new events live (SSE) and resumes after Last-Event-ID', async () => {
    const fresh = await merchantWithKey(s);
    await emit(s.database.db, { merchantId: fresh.merchantId, accountId: fresh.accountId, subject: 'before-stream' });
    const ctl = new AbortController();
    const res = await fetch(`${s.url}/api/external/events/stream?type=pix.charge.paid`, { headers: { authorization: fresh.client.authHeader() }, signal: ctl.signal });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^text\/event-stream/);
    const it = sse(res);
    await emit(s.database.db, { merchantId: fresh.merchantId, accountId: fresh.accountId, subject: 'skipped', event: 'pix.payout.returned' });
    await emit(s.database.db, { merchantId: fresh.merchantId, accountId: fresh.accountId, subject: 'live-1' });
    // The stream starts at the newest *final* event (src/events/feed.ts): older events are for
    // GET /events. On a shared PostgreSQL another transaction that was open when 'before-stream'
    // committed holds the horizon back, and the stream then starts just before it and sends it
    // first — an event committed a moment before the stream is never skipped, only maybe sent.
    const subjects: string[] = [];
    let got: { event?: string; data: string; id?: string };
    for (;;) {
      got = (await it.next()).value!;
      expect(got.event).toBe('pix.charge.paid');
      subjects.push(JSON.parse(got.data).subject);
      if (subjects.at(-1) === 'live-1' || subjects.length > 2) break;
    }
    expect([['live-1'], ['before-stream', 'live-1']]).toContainEqual(subjects);
    const data = JSON.parse(got.data);
    expect(got.id).toBe(String(data.sequence));
    ctl.abort();

    await emit(s.database.db, { merchantId: fresh.merchantId, accountId: fresh.accountId, subject: 'while-away' });
    const ctl2 = new AbortController();
    const again = await fetch(`${s.url}/api/external/events/stream`, { headers: { authorization: fresh.client.authHeader(), 'last-event-id': got.id! }, signal: ctl2.signal });
    const resumed = JSON.parse((await sse(again).next()).value!.data);
    expect(resumed.subject).toBe('while-away');
    ctl2.abort();
  });

  it.skipIf(backend !== 'postgres')('never skips an event whose transaction commits after a later one (cursor horizon)', async () => {
    const fresh = await merchantWithKey(s);
    let release!: () => void;
    const held = new Promise<void>((resolve) => (release = resolve));
    let inserted = false;
    const slow = s.database.db.transaction(async (tx) => {
      await emitInto(tx, fresh, 'slow');
      inserted = true;
      await held;
    });
    await waitUntil(() => inserted);
    await emit(s.database.db, { merchantId: fresh.merchantId, accountId: fresh.accountId, subject: 'fast' });
    // 'fast' is committed, but an older transaction that may hold a lower id is still open.
    expect((await fresh.client.get('/events')).body.events).toEqual([]);
    release();
    await slow;
    // The horizon is the whole cluster's: a transaction of another test (CI runs files in
    // parallel on one server) may still hold it back for a moment — at most
    // FEED_HORIZON_MAX_WAIT_SECONDS. Both then come, in order, none skipped.
    const subjects = async () => (await fresh.client.get('/events')).body.events.map((e: { subject: string }) => e.subject);
    await waitUntil(async () => (await subjects()).length === 2, (FEED_HORIZON_MAX_WAIT_SECONDS + 2) * 1000, 'both events to be final');
    expect(await subjects()).toEqual(['slow', 'fast']);
  });
});

async function emitInto(tx: import('../../src/db/db.js').Sql, m: MerchantFixture, subject: string) {
  const { emitEvent } = await import('../../src/events/outbox.js');
  await emitEvent(tx, { event: 'pix.charge.paid', merchantId: m.merchantId, accountId: m.accountId, subject, payload: { status: 'paid' } });
}
