import type { ServerResponse } from 'node:http';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { AppContext } from '../../context.js';
import { principal, recheckCredentials } from '../../external/pipeline.js';
import { businessError } from '../../http/errors.js';
import { QueryReader } from '../../http/query.js';
import { catalogEntry, deliveredEventFor } from '../../events/catalog.js';
import { latestSequence, readFeed, type FeedEvent, type FeedQuery } from '../../events/feed.js';
import { Waker, wakeOn } from '../../lib/wakeable.js';
import { monotonicNow } from '../../lib/clock.js';

export const FEED_LIMIT_DEFAULT = 100;
export const FEED_LIMIT_MAX = 500;
/** Live streams open at once per merchant in one process. */
export const MAX_STREAMS_PER_MERCHANT = 5;
/**
 * A live stream reads when woken — an event written in this process (`outbox`, after commit) or
 * fanned out by any process (`events`, NOTIFY) — at most every STREAM_MIN_SPACING_MS, and at the
 * latest every STREAM_SAFETY_NET_MS (a missed wake-up, an event not fanned out yet elsewhere).
 */
export const STREAM_MIN_SPACING_MS = 100;
export const STREAM_SAFETY_NET_MS = 5_000;
/**
 * After a wake-up a stream keeps reading every STREAM_FOLLOW_UP_MS for STREAM_FOLLOW_UP_FOR_MS: an
 * event is held back while an older transaction is still running (feed.ts), and that
 * transaction's end may wake nobody.
 */
export const STREAM_FOLLOW_UP_MS = 250;
export const STREAM_FOLLOW_UP_FOR_MS = 2_000;
/** The channels that wake live streams (src/webhooks/repository.ts WAKE). */
const STREAM_WAKE = ['outbox', 'events'] as const;
/**
 * A stream checks the credentials it was opened with again on every change notification
 * (`auth_changed`, via the credential cache) and at least this often, and ends once they would be
 * refused (src/external/pipeline.ts `recheckCredentials`).
 */
export const STREAM_CREDENTIALS_CHECK_MS = 2_000;
/** A comment line keeps proxies from closing an idle stream. */
export const STREAM_HEARTBEAT_MS = 15_000;

const CURSOR = /^\d{1,15}$/;

/**
 * Live-stream slots per merchant in this process. `take` counts synchronously (no await between the
 * check and the count) and its release is idempotent, so a slot is given back exactly once.
 */
export class StreamSlots {
  private readonly taken = new Map<number, number>();
  constructor(private readonly max: number) {}

  /** The release of a slot of `merchantId`, or undefined when all of its slots are taken. */
  take(merchantId: number): (() => void) | undefined {
    const n = this.taken.get(merchantId) ?? 0;
    if (n >= this.max) return undefined;
    this.taken.set(merchantId, n + 1);
    let released = false;
    return () => {
      if (released) return;
      released = true;
      const left = (this.taken.get(merchantId) ?? 1) - 1;
      if (left <= 0) this.taken.delete(merchantId);
      else this.taken.set(merchantId, left);
    };
  }
}

interface FeedParams {
  after: number | undefined;
  types: string[];
  limit: number;
}

function readParams(req: FastifyRequest): FeedParams {
  const r = new QueryReader(req.query);
  const afterText = r.string('after', CURSOR, 'must be a sequence number (an integer >= 0)');
  const limit = r.int('limit', 1, FEED_LIMIT_MAX, FEED_LIMIT_DEFAULT);
  const raw = (req.query as Record<string, unknown>)?.type;
  const names = (Array.isArray(raw) ? raw : raw === undefined || raw === '' ? [] : [raw]).flatMap((v) => String(v).split(',')).map((v) => v.trim()).filter(Boolean);
  const unknown = names.filter((n) => !catalogEntry(n));
  if (unknown.length > 0) r.add('type', `contains unknown events: ${unknown.join(', ')}`);
  r.done();
  // A subscription alias reads the event it stands for, as webhooks deliver it.
  const types = [...new Set(names.map(deliveredEventFor))];
  return { after: afterText === undefined ? undefined : Number(afterText), types, limit };
}

/**
 * GET /events (a page of the merchant's events after a cursor) and GET /events/stream (the same
 * events live, as Server-Sent Events). Permission `account:read`: the events are what the
 * merchant's webhooks receive, and that permission already reads the webhooks and their secrets.
 */
export async function eventFeedRoutes(app: FastifyInstance, ctx: AppContext) {
  const open = new Set<() => void>();
  // One subscription per process for all live streams, taken when the first opens.
  const wakes = new Set<() => void>();
  let subscribed: Promise<() => Promise<void>> | undefined;
  const subscribe = () =>
    (subscribed ??= wakeOn(ctx.db, STREAM_WAKE, () => {
      for (const wake of wakes) wake();
    }, ctx.log));
  app.addHook('preClose', async () => {
    for (const end of [...open]) end();
    const off = await subscribed?.catch(() => undefined);
    await off?.();
  });

  app.get('/events', { config: { permission: 'account:read' } }, async (req) => {
    const p = principal(req);
    const q = readParams(req);
    const after = q.after ?? 0;
    const rows = await readFeed(ctx.db, { merchantId: p.merchantId, accountId: p.keyAccountId, after, types: q.types, limit: q.limit + 1 });
    const events = rows.slice(0, q.limit);
    return { worked: true, events, next_after: events.at(-1)?.sequence ?? after, has_more: rows.length > q.limit };
  });

  const streams: StreamDeps = { ctx, slots: new StreamSlots(MAX_STREAMS_PER_MERCHANT), open, wakes, subscribe };
  app.get('/events/stream', { config: { permission: 'account:read' } }, (req, reply) => streamEvents(req, reply, streams));
}

/** What the live streams of one app share. */
interface StreamDeps {
  ctx: AppContext;
  slots: StreamSlots;
  /** The `end` of every open stream (ended when the app closes). */
  open: Set<() => void>;
  /** The `wake` of every open stream (called on a wake-up of STREAM_WAKE). */
  wakes: Set<() => void>;
  /** Takes the process's one subscription to STREAM_WAKE (once). */
  subscribe: () => Promise<unknown>;
}

/** What ends or wakes one live stream; `waker` interrupts its sleep. */
class StreamSignals {
  ended = false;
  eventWoken = false;
  credentialsChanged = false;
  wokenAt = 0;
  readonly waker = new Waker();
  readonly end = () => {
    if (this.ended) return;
    this.ended = true;
    this.waker.wake();
  };
  readonly wake = () => {
    this.eventWoken = true;
    this.wokenAt = monotonicNow();
    this.waker.wake();
  };
  readonly credentialsChange = () => {
    this.credentialsChanged = true;
    this.waker.wake();
  };
}

/** GET /events/stream: takes a slot, opens the stream and sends the events until either side ends it. */
async function streamEvents(req: FastifyRequest, reply: FastifyReply, deps: StreamDeps): Promise<void> {
  const { ctx } = deps;
  const p = principal(req);
  const q = readParams(req);
  const lastEventId = req.headers['last-event-id'];
  const resumeFrom = typeof lastEventId === 'string' && CURSOR.test(lastEventId) ? Number(lastEventId) : undefined;
  // The slot is taken before the first await, so concurrent opens cannot all pass the check,
  // and from here every path — a hang-up while the stream opens included — gives it back.
  const release = deps.slots.take(p.merchantId);
  if (!release) throw businessError(429, 'too_many_requests', `at most ${MAX_STREAMS_PER_MERCHANT} event streams per merchant at once`);

  const res = reply.raw;
  const s = new StreamSignals();
  // Listeners first: a client that hangs up during any await below ends the stream.
  res.on('close', s.end);
  req.raw.socket?.on('close', s.end);
  if (res.destroyed || req.raw.socket?.destroyed) s.end();
  deps.open.add(s.end);
  deps.wakes.add(s.wake);
  const unwatch = ctx.credentials.onChange(s.credentialsChange);

  try {
    const cursor = resumeFrom ?? q.after ?? (await latestSequence(ctx.db, p.merchantId, p.keyAccountId));
    await deps.subscribe();
    if (s.ended) return;
    reply.hijack();
    res.writeHead(200, {
      'content-type': 'text/event-stream; charset=utf-8',
      'cache-control': 'no-store',
      connection: 'keep-alive',
      'x-accel-buffering': 'no',
      'x-request-id': req.id,
    });
    // The starting cursor at once, as an `id:` line: a client that loses the connection before
    // the first event resumes from here (Last-Event-ID), not at whatever is newest by then.
    res.write(`retry: 2000\nid: ${cursor}\n: pixgate events for merchant ${p.merchantId} after ${cursor}\n\n`);
    await sendEvents(req, res, ctx, s, { merchantId: p.merchantId, accountId: p.keyAccountId, types: q.types }, cursor);
  } catch (err) {
    if (!reply.sent && !res.headersSent && !s.ended) throw err;
    req.log.error({ err }, 'event stream failed');
  } finally {
    unwatch();
    deps.wakes.delete(s.wake);
    deps.open.delete(s.end);
    res.off('close', s.end);
    req.raw.socket?.off('close', s.end);
    release();
    if (reply.sent || res.headersSent) res.end();
    else if (s.ended) {
      // The client left before the stream opened: nothing to answer.
      reply.hijack();
      res.destroy();
    }
  }
}

/**
 * The loop of an open stream: reads and writes the events after `cursor` when woken (or by the
 * follow-up and safety-net timers), checks the credentials again, sends heartbeats; returns when
 * the stream ended or its credentials were refused.
 */
async function sendEvents(
  req: FastifyRequest,
  res: ServerResponse,
  ctx: AppContext,
  s: StreamSignals,
  feed: Omit<FeedQuery, 'after' | 'limit'>,
  cursor: number,
): Promise<void> {
  let lastWrite = monotonicNow();
  let lastRead = -Infinity;
  let lastCheck = monotonicNow();
  let readDue = true;
  let nextReadAt = 0;
  while (!s.ended) {
    // The credentials are checked again before every read, on every change notification
    // (auth_changed) and at least every STREAM_CREDENTIALS_CHECK_MS: a revoked or expired key,
    // a deactivated account or merchant, a permission or whitelist taken away ends the stream
    // as it refuses a new request. While nothing changes the check costs no statement.
    if (readDue || s.credentialsChanged || monotonicNow() - lastCheck >= STREAM_CREDENTIALS_CHECK_MS) {
      s.credentialsChanged = false;
      lastCheck = monotonicNow();
      const refused = await recheckCredentials(req, ctx);
      if (refused) {
        if (!s.ended) res.write(`: closed: ${refused.message}\n\n`);
        return;
      }
      if (s.ended) return;
    }
    if (readDue) {
      readDue = false;
      const spacing = lastRead + STREAM_MIN_SPACING_MS - monotonicNow();
      if (spacing > 0) await new Promise((r) => setTimeout(r, spacing));
      lastRead = monotonicNow();
      const rows = await readFeed(ctx.db, { ...feed, after: cursor, limit: FEED_LIMIT_MAX });
      for (const e of rows) {
        if (s.ended) break;
        await writeEvent(res, e);
        cursor = e.sequence;
        lastWrite = monotonicNow();
      }
      if (rows.length === FEED_LIMIT_MAX) {
        readDue = true;
        continue;
      }
      const followUp = monotonicNow() - s.wokenAt < STREAM_FOLLOW_UP_FOR_MS;
      nextReadAt = monotonicNow() + (followUp ? STREAM_FOLLOW_UP_MS : STREAM_SAFETY_NET_MS);
    }
    if (s.ended) return;
    if (monotonicNow() - lastWrite >= STREAM_HEARTBEAT_MS) {
      res.write(': keep-alive\n\n');
      lastWrite = monotonicNow();
    }
    const now = monotonicNow();
    await s.waker.sleep(Math.min(nextReadAt - now, STREAM_CREDENTIALS_CHECK_MS - (now - lastCheck), STREAM_HEARTBEAT_MS - (now - lastWrite)));
    if (s.eventWoken || monotonicNow() >= nextReadAt) {
      s.eventWoken = false;
      readDue = true;
    }
  }
}

/** Writes one event; a slow reader is not buffered without bound: it waits for the socket to drain. */
async function writeEvent(res: ServerResponse, e: FeedEvent): Promise<void> {
  if (!res.write(`id: ${e.sequence}\nevent: ${e.event}\ndata: ${JSON.stringify(e)}\n\n`)) {
    await new Promise<void>((resolve) => {
      const done = () => {
        res.off('drain', done);
        res.off('close', done);
        resolve();
      };
      res.on('drain', done);
      res.on('close', done);
    });
  }
}
