import { createHmac } from 'node:crypto';
import { lookup as dnsLookup, type LookupAddress } from 'node:dns';
import type { LookupFunction } from 'node:net';
import { Agent, buildConnector, request, type Dispatcher } from 'undici';
import { addressProblem, destinationProblem, isAllowedHost, type AllowedHost } from './destination.js';
import { standardWebhookHeaders } from './standardWebhooks.js';

/** `X-Service-Signature`: hex HMAC-SHA256 of the exact bytes sent, keyed with the webhook's secret. */
export function signDelivery(secret: string, body: string | Buffer): string {
  return createHmac('sha256', secret).update(body).digest('hex');
}

export const USER_AGENT = 'pixgate-webhooks/1';
/** Response bytes read from a receiver (the rest is discarded with the connection). */
export const MAX_RESPONSE_BYTES = 4096;
/** Characters of the response kept in the attempt record. */
export const RESPONSE_EXCERPT_CHARS = 1024;

/** Raised when a destination is, or resolves to, a private address at connection time. */
export class PrivateDestinationError extends Error {
  readonly code = 'EPRIVATEDESTINATION';
  constructor(host: string, address: string, why: string) {
    super(host === address ? `destination ${address} is private (${why})` : `destination ${host} resolves to ${address} (${why})`);
    this.name = 'PrivateDestinationError';
  }
}

/** Resolves a name to every address (the default is the system resolver, as connections use). */
export type Resolver = (hostname: string) => Promise<LookupAddress[]>;

export const systemResolver: Resolver = (hostname) =>
  new Promise((resolve, reject) =>
    dnsLookup(hostname, { all: true, verbatim: true }, (err, addresses) => (err ? reject(err) : resolve(addresses))),
  );

/**
 * A `lookup` for sockets that refuses a name if ANY of its addresses is private, so a name that
 * passed registration cannot later be pointed at an internal address (DNS rebinding): the check and
 * the connection use the same answer. `guard: false` (allowed hosts) resolves without the check.
 */
export function guardedLookup(resolve: Resolver, guard = true): LookupFunction {
  return (hostname, options, callback) => {
    resolve(hostname).then(
      (all) => {
        for (const a of guard ? all : []) {
          const why = addressProblem(a.address);
          if (why !== null) return callback(new PrivateDestinationError(hostname, a.address, why), '', 0);
        }
        const family = typeof options.family === 'number' ? options.family : 0;
        const usable = family === 0 ? all : all.filter((a) => a.family === family);
        if (usable.length === 0) {
          const err = Object.assign(new Error(`getaddrinfo ENOTFOUND ${hostname}`), { code: 'ENOTFOUND' });
          return callback(err, '', 0);
        }
        if (options.all) return (callback as unknown as (e: null, a: LookupAddress[]) => void)(null, usable);
        callback(null, usable[0]!.address, usable[0]!.family);
      },
      (err: NodeJS.ErrnoException) => callback(err, '', 0),
    );
  };
}

export interface DeliveryRequest {
  url: string;
  secret: string;
  body: string;
  event: string;
  deliveryId: string;
  attempt: number;
}

export interface DeliveryResult {
  /** 2xx answered. */
  ok: boolean;
  statusCode: number | null;
  error: string | null;
  responseBody: string | null;
  durationMs: number;
  /** The attempt was cut short because the worker is stopping (it does not count as a failure). */
  aborted: boolean;
}

export interface HttpDelivererOptions {
  allowed: readonly AllowedHost[];
  timeoutMs: number;
  resolver?: Resolver;
  /** Current time in ms (the `webhook-timestamp` of each attempt). */
  now?: () => number;
}

/**
 * Sends deliveries: POST, raw JSON body, signed; redirects are not followed (a 3xx is a failure);
 * one deadline covers connection, request and response; at most MAX_RESPONSE_BYTES of the answer are
 * read. Destinations outside WEBHOOK_ALLOWED_HOSTS go through an agent whose every connection is
 * checked: the name's addresses before connecting, the peer address after.
 */
export class HttpDeliverer {
  private readonly guarded: Agent;
  private readonly trusted: Agent;

  constructor(private readonly options: HttpDelivererOptions) {
    const resolver = options.resolver ?? systemResolver;
    const base = buildConnector({ lookup: guardedLookup(resolver), timeout: options.timeoutMs });
    const connect: buildConnector.connector = (opts, callback) =>
      base(opts, (err, socket) => {
        if (err || !socket) return callback(err ?? new Error('connection failed'), null);
        const peer = socket.remoteAddress ?? '';
        const why = addressProblem(peer);
        if (why !== null) {
          socket.destroy();
          return callback(new PrivateDestinationError(opts.hostname, peer, why), null);
        }
        callback(null, socket);
      });
    const common = { keepAliveTimeout: 4_000, connections: 64 };
    this.guarded = new Agent({ ...common, connect });
    this.trusted = new Agent({ ...common, connect: { lookup: guardedLookup(resolver, false), timeout: options.timeoutMs } });
  }

  async send(d: DeliveryRequest, stop: AbortSignal): Promise<DeliveryResult> {
    const started = performance.now();
    const elapsed = () => Math.round(performance.now() - started);
    const result = (r: Omit<DeliveryResult, 'durationMs' | 'aborted'>, aborted = false): DeliveryResult => ({ ...r, durationMs: elapsed(), aborted });

    let url: URL;
    try {
      url = new URL(d.url);
    } catch {
      return result({ ok: false, statusCode: null, error: 'invalid URL', responseBody: null });
    }
    // Literal addresses never reach the lookup: judge them here (the stored URL may predate a rule).
    const why = destinationProblem(url, this.options.allowed);
    if (why !== null) return result({ ok: false, statusCode: null, error: `destination ${url.hostname} is private (${why})`, responseBody: null });
    const dispatcher: Dispatcher = isAllowedHost(this.options.allowed, url) ? this.trusted : this.guarded;

    const deadline = AbortSignal.timeout(this.options.timeoutMs);
    const signal = AbortSignal.any([deadline, stop]);
    let statusCode: number | null = null;
    let excerpt: string | null = null;
    try {
      const res = await request(url, {
        method: 'POST',
        dispatcher,
        signal,
        headersTimeout: this.options.timeoutMs,
        bodyTimeout: this.options.timeoutMs,
        headers: {
          'content-type': 'application/json',
          'user-agent': USER_AGENT,
          'x-service-signature': signDelivery(d.secret, d.body),
          'x-service-event': d.event,
          'x-service-delivery': d.deliveryId,
          'x-service-attempt': String(d.attempt),
          ...standardWebhookHeaders(d.secret, d.deliveryId, Math.floor((this.options.now ?? Date.now)() / 1000), d.body),
        },
        body: d.body,
      });
      statusCode = res.statusCode;
      // The status decides the outcome; a body cut short by the deadline only shortens the excerpt.
      excerpt = await readExcerpt(res.body).catch(() => null);
      const ok = statusCode >= 200 && statusCode < 300;
      return result({ ok, statusCode, error: ok ? null : describeStatus(statusCode), responseBody: excerpt });
    } catch (err) {
      if (stop.aborted) return result({ ok: false, statusCode, error: 'aborted: worker stopping', responseBody: excerpt }, true);
      const message = deadline.aborted ? `timed out after ${this.options.timeoutMs} ms` : describeError(err);
      return result({ ok: false, statusCode, error: message, responseBody: excerpt });
    }
  }

  async close(): Promise<void> {
    await Promise.all([this.guarded.destroy(), this.trusted.destroy()]);
  }
}

function describeStatus(status: number): string {
  if (status >= 300 && status < 400) return `HTTP ${status}: redirects are not followed`;
  return `HTTP ${status}`;
}

function describeError(err: unknown): string {
  const e = err as { code?: string; message?: string; cause?: { code?: string; message?: string } };
  const inner = e.cause && (e.cause.code || e.cause.message) ? e.cause : e;
  const message = inner.message ?? '';
  const text = (inner.code && !message.includes(inner.code) && !(inner instanceof PrivateDestinationError) ? `${inner.code}: ${message}` : message) || String(err);
  return clean(text).slice(0, 500);
}

/** Reads at most MAX_RESPONSE_BYTES; a longer body is cut (and its connection dropped). */
async function readExcerpt(body: Dispatcher.ResponseData['body']): Promise<string> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of body) {
    const buf = chunk as Buffer;
    chunks.push(buf);
    size += buf.length;
    if (size >= MAX_RESPONSE_BYTES) {
      body.destroy();
      break;
    }
  }
  return clean(Buffer.concat(chunks).subarray(0, MAX_RESPONSE_BYTES).toString('utf8')).slice(0, RESPONSE_EXCERPT_CHARS);
}

/** Text PostgreSQL can store (no NUL). */
function clean(text: string): string {
  return text.replace(/\u0000/g, '\uFFFD');
}
