import { connect, createServer, type AddressInfo, type Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { emitEvent } from '../../src/events/outbox.js';
import { STREAM_SAFETY_NET_MS } from '../../src/api/events/feed.routes.js';
import { Pixgate, readSse } from '@pixgate/sdk';
import { ApiClient, merchantWithKey, type MerchantFixture } from '../helpers/client.js';
import { BACKENDS, openTestDatabase, secondHandle, type TestDatabase } from '../helpers/db.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { recordStatements } from '../helpers/statements.js';
import { emit, startReceiver, waitUntil } from '../webhooks/helpers.js';
import { runCli } from '../../src/cli/main.js';
import type { CliIo } from '../../src/cli/io.js';

type Msg = { id?: string; event?: string; data: string };

/**
 * A TCP proxy in front of the server that can cut every connection and hold new ones back (the
 * fault proxy of test/helpers answers whole bodies, a stream needs bytes passed as they come).
 */
async function startTcpProxy(upstreamPort: number) {
  const pairs = new Set<[Socket, Socket]>();
  const held: Socket[] = [];
  const p = {
    url: '',
    fromServer: '',
    holdNew: false,
    cutAll() {
      for (const [a, b] of pairs) {
        a.destroy();
        b.destroy();
      }
      pairs.clear();
    },
    release() {
      p.holdNew = false;
      for (const c of held.splice(0)) pipe(c);
    },
    close: async () => {
      p.cutAll();
      for (const c of held) c.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
  const pipe = (client: Socket) => {
    const upstream = connect(upstreamPort, '127.0.0.1');
    const pair: [Socket, Socket] = [client, upstream];
    pairs.add(pair);
    upstream.on('data', (chunk: Buffer) => void (p.fromServer += chunk.toString('utf8')));
    client.pipe(upstream);
    upstream.pipe(client);
    const drop = () => {
      client.destroy();
      upstream.destroy();
      pairs.delete(pair);
    };
    client.on('error', drop).on('close', drop);
    upstream.on('error', drop).on('close', drop);
  };
  const server = createServer((client) => {
    client.on('error', () => {});
    if (p.holdNew) {
      client.pause();
      held.push(client);
    } else pipe(client);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  p.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return p;
}

/** Every message of a stream until it ends (or `ctl` aborts it), collected as they come. */
function collect(res: Response) {
  const got: Msg[] = [];
  let ended = false;
  const done = (async () => {
    try {
      for await (const msg of readSse(res.body!)) got.push(msg);
    } catch {
      /* aborted */
    }
    ended = true;
  })();
  return { got, done, get ended() {
    return ended;
  } };
}

/** A payment event carrying the payer's name and CPF, as real charge events do. */
const payerEvent = (m: MerchantFixture, subject: string) => ({
  event: 'pix.charge.paid',
  merchantId: m.merchantId,
  accountId: m.accountId,
  subject,
  payload: { status: 'paid', amount: 1_000, payer: { name: 'Maria Pagadora', document: '12345678909' } },
});

/**
 * Item 9 of issue 24: a live stream checks its credentials again on every `auth_changed`
 * notification (through the credential cache) and at least every few seconds, and ends. Two app
 * instances on one database (on PostgreSQL two pools, like two processes): the stream is on B, the
 * change is made on A; with a cache TTL of a minute only the notification can explain B noticing.
 */
describe.each(BACKENDS)('a live events stream after its credentials change, on %s', (backend) => {
  let a: TestServer;
  let b: TestServer;
  let shared: TestDatabase;
  let bDatabase: TestDatabase;
  const env = { AUTH_CACHE_TTL_MS: '60000' };

  beforeAll(async () => {
    shared = await openTestDatabase(backend);
    bDatabase = await secondHandle(shared);
    a = await startTestServer({ database: shared, env, workers: false });
    b = await startTestServer({ database: bDatabase, env, workers: false });
  });
  afterAll(async () => {
    await b?.close();
    await a?.close();
    if (bDatabase !== shared) await bDatabase?.close();
    await shared?.close();
  });

  /** A merchant whose key B has cached, with a stream open on B that has delivered one event. */
  async function streaming(options: Parameters<typeof merchantWithKey>[1] = {}) {
    const m = await merchantWithKey(a, options);
    const onB = new ApiClient(b.url, m.client.clientId, m.client.clientSecret);
    expect((await onB.get('/balance')).status).toBe(200);
    const ctl = new AbortController();
    const res = await fetch(`${b.url}/api/external/events/stream`, { headers: { authorization: onB.authHeader() }, signal: ctl.signal });
    expect(res.status).toBe(200);
    const s = collect(res);
    await emitEvent(a.ctx.db, payerEvent(m, 'before'));
    await waitUntil(() => s.got.some((e) => e.data.includes('"before"')), 15_000, 'the first event');
    return { m, onB, ctl, s };
  }

  /** After `change` on A: the stream ends, and an event written after it never reaches it. */
  async function endsAfter(st: Awaited<ReturnType<typeof streaming>>, change: () => Promise<unknown>) {
    try {
      await change();
      await emitEvent(a.ctx.db, payerEvent(st.m, 'after-change'));
      await waitUntil(() => st.s.ended, 15_000, 'the stream to end');
      expect(st.s.got.map((e) => e.data).join('\n')).not.toContain('after-change');
    } finally {
      st.ctl.abort();
    }
  }

  it('key revoked on A: the stream on B ends, and REST answers 401 with the same key', async () => {
    const st = await streaming();
    await endsAfter(st, async () => expect((await a.admin('POST', `/api-keys/${st.m.client.clientId}/revoke`)).status).toBe(200));
    expect((await st.onB.get('/balance')).status).toBe(401);
    const again = await fetch(`${b.url}/api/external/events/stream`, { headers: { authorization: st.onB.authHeader() } });
    expect(again.status).toBe(401);
  });

  it('account deactivated on A: the stream on B ends', async () => {
    const st = await streaming();
    await endsAfter(st, async () => expect((await a.admin('PATCH', `/accounts/${st.m.accountId}`, { status: 'inactive' })).status).toBe(200));
    expect((await st.onB.get('/balance')).status).toBe(403);
  });

  it('merchant deactivated in plain SQL: the stream of its merchant-wide key on B ends', async () => {
    const st = await streaming({ accountScoped: false });
    await endsAfter(st, () => a.ctx.db.query(`UPDATE merchants SET status = 'inactive' WHERE id = $1`, [st.m.merchantId]));
  });

  it('permission account:read taken away on A: the stream on B ends', async () => {
    const st = await streaming();
    await endsAfter(st, async () => expect((await a.admin('PATCH', `/api-keys/${st.m.client.clientId}`, { permissions: ['pix:read'] })).status).toBe(200));
  });

  it('a change to another merchant’s key leaves the stream open', async () => {
    const st = await streaming();
    try {
      const other = await merchantWithKey(a);
      expect((await a.admin('POST', `/api-keys/${other.client.clientId}/revoke`)).status).toBe(200);
      await emitEvent(a.ctx.db, payerEvent(st.m, 'still-open'));
      await waitUntil(() => st.s.got.some((e) => e.data.includes('"still-open"')), 15_000, 'the event after an unrelated change');
      expect(st.s.ended).toBe(false);
    } finally {
      st.ctl.abort();
    }
  });
});

/** Without the cache (AUTH_CACHE_TTL_MS=0) no notification comes: the periodic check alone ends the stream. */
describe.each(BACKENDS)('a live events stream without the credential cache, on %s', (backend) => {
  let s: TestServer;
  beforeAll(async () => {
    s = await startTestServer({ backend, workers: false, env: { AUTH_CACHE_TTL_MS: '0' } });
  });
  afterAll(async () => {
    await s?.close();
  });

  it('key revoked in plain SQL while the stream is idle: the stream ends within the periodic check', async () => {
    const m = await merchantWithKey(s);
    const ctl = new AbortController();
    const res = await fetch(`${s.url}/api/external/events/stream`, { headers: { authorization: m.client.authHeader() }, signal: ctl.signal });
    expect(res.status).toBe(200);
    const st = collect(res);
    try {
      await s.database.db.query('UPDATE api_keys SET active = false WHERE client_id = $1', [m.client.clientId]);
      await waitUntil(() => st.ended, 15_000, 'the stream to end');
    } finally {
      ctl.abort();
    }
  });
});

/**
 * Item 10 (slots taken atomically, released on every path, no ghost streams) and item 11 (the
 * starting cursor sent at once, and the SDK resuming from it) and item 14 (only public events).
 */
describe.each(BACKENDS)('live events stream slots and cursor on %s', (backend) => {
  let s: TestServer;
  beforeAll(async () => {
    s = await startTestServer({ backend, workers: false, env: { AUTH_CACHE_TTL_MS: '60000' } });
  });
  afterAll(async () => {
    await s?.close();
  });

  /**
   * Runs `during` while the stream's opening read (its starting cursor) cannot run: a transaction
   * holds outbox_events locked (on PGlite, whose one connection runs one thing at a time, any
   * transaction does). The key must be cached, so authentication needs no statement.
   */
  async function withOpeningStalled(during: () => Promise<void>) {
    let release!: () => void;
    const held = new Promise<void>((resolve) => (release = resolve));
    let locked!: () => void;
    const isLocked = new Promise<void>((resolve) => (locked = resolve));
    const tx = s.database.db.transaction(async (t) => {
      await t.query('LOCK TABLE outbox_events IN ACCESS EXCLUSIVE MODE');
      locked();
      await held;
    });
    await isLocked;
    try {
      await during();
    } finally {
      release();
      await tx;
    }
  }

  const OPENING = 'SELECT max(id) AS id FROM outbox_events';
  const READ = 'SELECT id, event_id, event, account_id, subject, created_at, payload';

  it('clients that hang up while their stream opens give their slot back, and leave no stream reading behind', async () => {
    const m = await merchantWithKey(s);
    expect((await m.client.get('/balance')).status).toBe(200);
    const statements = recordStatements(s.database.db);
    try {
      await withOpeningStalled(async () => {
        const sockets = Array.from({ length: 5 }, () => {
          const socket = connect(Number(new URL(s.url).port), '127.0.0.1');
          socket.on('error', () => {});
          socket.write(`GET /api/external/events/stream HTTP/1.1\r\nHost: x\r\nAuthorization: ${m.client.authHeader()}\r\n\r\n`);
          return socket;
        });
        await waitUntil(() => statements.log.filter((st) => st.text.includes(OPENING)).length >= 5, 15_000, 'the five streams to be opening');
        for (const socket of sockets) socket.destroy();
        await new Promise((r) => setTimeout(r, 100)); // the hang-ups reach the server
      });
      // Every slot comes back: the merchant can open its 5 streams again.
      const ctls: AbortController[] = [];
      try {
        await waitUntil(
          async () => {
            const ctl = new AbortController();
            const res = await fetch(`${s.url}/api/external/events/stream`, { headers: { authorization: m.client.authHeader() }, signal: ctl.signal });
            ctl.abort();
            return res.status === 200;
          },
          10_000,
          'a stream to open after the hang-ups',
        );
        await new Promise((r) => setTimeout(r, 200));
        for (let i = 0; i < 5; i++) {
          const ctl = new AbortController();
          ctls.push(ctl);
          const res = await fetch(`${s.url}/api/external/events/stream`, { headers: { authorization: m.client.authHeader() }, signal: ctl.signal });
          expect(res.status).toBe(200);
        }
      } finally {
        for (const ctl of ctls) ctl.abort();
      }
      // With nobody connected, nothing reads the feed (a ghost stream reads at least every safety net).
      await new Promise((r) => setTimeout(r, 500));
      statements.take();
      await new Promise((r) => setTimeout(r, STREAM_SAFETY_NET_MS + 1_500));
      expect(statements.take().filter((st) => st.text.includes(READ))).toEqual([]);
    } finally {
      statements.stop();
    }
  });

  it('20 concurrent opens of one merchant: 5 streams, 15 answered 429', async () => {
    const m = await merchantWithKey(s);
    expect((await m.client.get('/balance')).status).toBe(200);
    const statements = recordStatements(s.database.db);
    const ctls = Array.from({ length: 20 }, () => new AbortController());
    const statuses: number[] = [];
    try {
      let answers!: Promise<Response>[];
      await withOpeningStalled(async () => {
        answers = ctls.map((ctl) => fetch(`${s.url}/api/external/events/stream`, { headers: { authorization: m.client.authHeader() }, signal: ctl.signal }));
        for (const a of answers) void a.then((r) => statuses.push(r.status), () => {});
        // Each request is either refused already or waiting for its opening read.
        await waitUntil(() => statuses.length + statements.log.filter((st) => st.text.includes(OPENING)).length >= 20, 15_000, 'all 20 requests to arrive');
      });
      await Promise.allSettled(answers);
      expect(statuses.filter((x) => x === 200)).toHaveLength(5);
      expect(statuses.filter((x) => x === 429)).toHaveLength(15);
    } finally {
      statements.stop();
      for (const ctl of ctls) ctl.abort();
    }
  });

  it('the stream sends its starting cursor at once as an `id:` line', async () => {
    const m = await merchantWithKey(s);
    await emit(s.database.db, { merchantId: m.merchantId, accountId: m.accountId, subject: 'old' });
    await waitUntil(async () => (await m.client.get('/events')).body.events.length === 1, 10_000, 'the event to be final');
    const newest = (await m.client.get('/events')).body.events[0].sequence;
    const ctl = new AbortController();
    const res = await fetch(`${s.url}/api/external/events/stream`, { headers: { authorization: m.client.authHeader() }, signal: ctl.signal });
    const first = (await readSse(res.body!).next()).value!;
    ctl.abort();
    expect(first).toEqual({ id: String(newest), data: '' });
  });

  it('the SDK stream resumes from the starting cursor after a drop before its first event: nothing written meanwhile is skipped', async () => {
    const m = await merchantWithKey(s);
    let connections = 0;
    // The first connection is cut right after the server's opening message.
    const cutFirst: typeof fetch = async (input, init) => {
      const res = await fetch(input, init);
      if (++connections > 1 || !res.body) return res;
      const reader = res.body.getReader();
      const body = new ReadableStream<Uint8Array>({
        async pull(controller) {
          const { value, done } = await reader.read();
          if (value) controller.enqueue(value);
          await reader.cancel().catch(() => {});
          if (done || value) controller.error(new TypeError('terminated'));
        },
      });
      return new Response(body, { status: res.status, headers: res.headers });
    };
    const written: string[] = [];
    const client = new Pixgate({
      baseUrl: s.url,
      clientId: m.client.clientId,
      clientSecret: m.client.clientSecret,
      breaker: false,
      fetch: cutFirst,
      // While the client is away (its backoff), four events are written.
      sleep: async () => {
        if (written.length > 0) return;
        for (let i = 0; i < 4; i++) {
          written.push(`meanwhile-${i}`);
          await emit(s.database.db, { merchantId: m.merchantId, accountId: m.accountId, subject: `meanwhile-${i}` });
        }
      },
    });
    const ctl = new AbortController();
    const got: string[] = [];
    for await (const e of client.events.stream({ signal: ctl.signal })) {
      got.push(e.subject);
      if (got.length === 4) break;
    }
    ctl.abort();
    expect(connections).toBe(2);
    expect(got).toEqual(written);
  });

  it('pixgate listen resumes from the starting cursor after a drop before its first event: all 4 events written meanwhile are forwarded', async () => {
    const m = await merchantWithKey(s);
    const r = await startReceiver();
    const proxy = await startTcpProxy(Number(new URL(s.url).port));
    const ctl = new AbortController();
    let out = '';
    const io: CliIo = {
      stdout: (t) => void (out += t),
      stderr: (t) => void (out += t),
      env: { PIXGATE_URL: proxy.url, PIXGATE_CLIENT_ID: m.client.clientId, PIXGATE_CLIENT_SECRET: m.client.clientSecret, HOME: '/nonexistent', DATA_DIR: '/nonexistent' },
      isTTY: false,
      cwd: process.cwd(),
      signal: ctl.signal,
    };
    const listening = runCli(['listen', '--forward-to', `${r.url}/local`], io);
    try {
      await waitUntil(() => proxy.fromServer.includes(': pixgate events for merchant'), 15_000, 'the stream to open');
      // The connection drops; until the test lets it, `listen` cannot reconnect, and meanwhile four events are written.
      proxy.holdNew = true;
      proxy.cutAll();
      for (let i = 0; i < 4; i++) await emit(s.database.db, { merchantId: m.merchantId, accountId: m.accountId, subject: `away-${i}` });
      proxy.release();
      await r.waitFor((x) => x.length >= 4, 20_000);
      expect(r.received.map((d) => d.body.transaction_id)).toEqual(['away-0', 'away-1', 'away-2', 'away-3']);
    } finally {
      ctl.abort();
      await listening;
      await proxy.close();
      await r.close();
    }
  });

  it('only the public catalog’s events: the internal account.deposit.completed is never in the feed or the stream', async () => {
    const m = await merchantWithKey(s);
    const ctl = new AbortController();
    const res = await fetch(`${s.url}/api/external/events/stream`, { headers: { authorization: m.client.authHeader() }, signal: ctl.signal });
    const st = collect(res);
    try {
      expect((await s.admin('POST', `/accounts/${m.accountId}/deposits`, { amount: 5_000 })).status).toBe(201);
      const [internal] = await s.database.db.query<{ n: number }>(`SELECT count(*)::int AS n FROM outbox_events WHERE merchant_id = $1 AND event = 'account.deposit.completed'`, [m.merchantId]);
      expect(internal!.n).toBe(1); // it is recorded (the audit trail), only never shown
      await emit(s.database.db, { merchantId: m.merchantId, accountId: m.accountId, subject: 'public' });
      await waitUntil(() => st.got.some((e) => e.data.includes('"public"')), 15_000, 'the public event');
      expect(st.got.filter((e) => e.data).map((e) => e.event)).toEqual(['pix.charge.paid']);
      const page = await m.client.get('/events');
      expect(page.body.events.map((e: { event: string }) => e.event)).toEqual(['pix.charge.paid']);
    } finally {
      ctl.abort();
    }
  });
});

describe('the SDK’s Server-Sent Events parser', () => {
  it('a CRLF split across two chunks is one line end, not two', async () => {
    const chunks = ['id: 7\r\ndata: a\r', '\ndata: b\r\n\r\n'];
    const body = new ReadableStream<Uint8Array>({
      start(controller) {
        for (const c of chunks) controller.enqueue(new TextEncoder().encode(c));
        controller.close();
      },
    });
    const got: Msg[] = [];
    for await (const msg of readSse(body)) got.push(msg);
    expect(got).toEqual([{ id: '7', data: 'a\nb' }]);
  });
});
