import { CircuitBreaker, type BreakerOptions } from './breaker.js';
import { errorFromResponse, NetworkError, PixgateError, TimeoutError } from './errors.js';
import { newIdempotencyKey, signRequest, type SignatureVersion } from './signing.js';
import type * as T from './types.js';
import type { Cased, KeyCase } from './types.js';

export interface PixgateOptions<C extends KeyCase = 'snake'> {
  /** The server, e.g. `http://127.0.0.1:8080` (the `/api/external` prefix is added). */
  baseUrl: string;
  clientId: string;
  clientSecret: string;
  /** Signature of POST bodies: `v2` (default: timestamp, nonce, replay protection) or `v1`. */
  signatureVersion?: SignatureVersion;
  /** `camel` sends `X-Key-Case: camelCase`: keys in and out are camelCase. */
  keyCase?: C;
  /** Deadline of one attempt (default 30 s). */
  timeoutMs?: number;
  /** Retries after the first attempt (default 3), only for requests that are safe to repeat. */
  maxRetries?: number;
  /** Backoff: base × 2^(attempt-1), full jitter, capped (defaults 250 ms, 8 s). */
  retryBaseMs?: number;
  retryMaxMs?: number;
  /** A 429 whose Retry-After exceeds this is not waited for (default 60 s). */
  maxRetryAfterMs?: number;
  /** The circuit breaker (default 3 failures, 30 s); false disables it. */
  breaker?: BreakerOptions | false;
  fetch?: typeof fetch;
  /** Random in [0, 1) for the jitter (tests). */
  random?: () => number;
  sleep?: (ms: number) => Promise<void>;
  now?: () => number;
}

export interface RequestOptions {
  query?: Record<string, string | number | boolean | readonly string[] | undefined>;
  body?: unknown;
  /** POST: the Idempotency-Key (default: a fresh one per call, reused across its retries); null sends none (and disables retries). */
  idempotencyKey?: string | null;
  signatureVersion?: SignatureVersion;
  headers?: Record<string, string>;
  signal?: AbortSignal;
  /** false: one attempt only. */
  retry?: boolean;
}

export interface ApiResponse<B = unknown> {
  status: number;
  headers: Record<string, string>;
  body: B;
  text: string;
  requestId: string | null;
  /** Attempts made (1 = no retry). */
  attempts: number;
}

const RETRYABLE_STATUS = new Set([500, 502, 503, 504]);
const defaultSleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/**
 * A pixgate merchant-API client. Every POST is signed (v2 by default) and carries an
 * Idempotency-Key that its own retries reuse; retries (network errors, timeouts, 429, 409 "still
 * being processed", 5xx) happen only for requests that are safe to repeat — GETs, DELETEs and POSTs
 * with an Idempotency-Key — with exponential backoff and full jitter; a circuit breaker stops
 * calling a failing server. Errors are typed (`errors.ts`).
 */
export class Pixgate<C extends KeyCase = 'snake'> {
  readonly breaker: CircuitBreaker | null;
  private readonly o: Required<Omit<PixgateOptions<C>, 'breaker' | 'keyCase'>> & { keyCase: KeyCase };

  constructor(options: PixgateOptions<C>) {
    this.o = {
      baseUrl: options.baseUrl.replace(/\/+$/, ''),
      clientId: options.clientId,
      clientSecret: options.clientSecret,
      signatureVersion: options.signatureVersion ?? 'v2',
      keyCase: options.keyCase ?? 'snake',
      timeoutMs: options.timeoutMs ?? 30_000,
      maxRetries: options.maxRetries ?? 3,
      retryBaseMs: options.retryBaseMs ?? 250,
      retryMaxMs: options.retryMaxMs ?? 8_000,
      maxRetryAfterMs: options.maxRetryAfterMs ?? 60_000,
      fetch: options.fetch ?? ((...args) => globalThis.fetch(...args)),
      random: options.random ?? Math.random,
      sleep: options.sleep ?? defaultSleep,
      now: options.now ?? Date.now,
    };
    this.breaker = options.breaker === false ? null : new CircuitBreaker(options.breaker ?? {}, this.o.now);
  }

  /** Backoff before retry `n` (1-based): full jitter over min(max, base × 2^(n-1)). */
  backoffMs(n: number): number {
    return Math.round(this.o.random() * Math.min(this.o.retryMaxMs, this.o.retryBaseMs * 2 ** (n - 1)));
  }

  /** One call of the merchant API: signed, retried where safe; throws a PixgateError unless 2xx. */
  async request<B = unknown>(method: string, path: string, options: RequestOptions = {}): Promise<ApiResponse<B>> {
    method = method.toUpperCase();
    const fullPath = `/api/external${path.startsWith('/') ? path : `/${path}`}`;
    const url = this.o.baseUrl + fullPath + queryString(options.query);
    const text = options.body === undefined ? undefined : typeof options.body === 'string' ? options.body : JSON.stringify(options.body);
    const idempotencyKey = method === 'POST' ? (options.idempotencyKey === undefined ? newIdempotencyKey() : options.idempotencyKey) : (options.idempotencyKey ?? null);
    const safeToRepeat = method === 'GET' || method === 'HEAD' || method === 'DELETE' || idempotencyKey !== null;
    const maxAttempts = options.retry === false || !safeToRepeat ? 1 : this.o.maxRetries + 1;

    for (let attempt = 1; ; attempt++) {
      const headers: Record<string, string> = { authorization: `ApiKey ${this.o.clientId}:${this.o.clientSecret}`, accept: 'application/json' };
      if (this.o.keyCase === 'camel') headers['x-key-case'] = 'camelCase';
      if (text !== undefined) {
        headers['content-type'] = 'application/json';
        if (method === 'POST') {
          // Signed afresh on every attempt: a new timestamp and nonce, the same Idempotency-Key.
          const signed = await signRequest({
            version: options.signatureVersion ?? this.o.signatureVersion,
            clientSecret: this.o.clientSecret,
            method,
            path: fullPath,
            body: text,
            ...(idempotencyKey !== null ? { idempotencyKey } : {}),
          });
          Object.assign(headers, signed.headers);
        }
      }
      if (idempotencyKey !== null) headers['idempotency-key'] = idempotencyKey;
      Object.assign(headers, options.headers);

      // Entered only now, right before the call: nothing between here and its outcome can throw.
      const ticket = this.breaker?.enter() ?? { probe: false };
      const deadline = AbortSignal.timeout(this.o.timeoutMs);
      const signal = options.signal ? AbortSignal.any([deadline, options.signal]) : deadline;
      let res: Response;
      let responseText: string;
      try {
        res = await this.o.fetch(url, { method, headers, signal, ...(text !== undefined ? { body: text } : {}) });
        responseText = await res.text();
      } catch (err) {
        if (options.signal?.aborted) {
          this.breaker?.cancelled(ticket);
          throw err;
        }
        this.breaker?.failure(ticket);
        const error = deadline.aborted ? new TimeoutError(this.o.timeoutMs) : new NetworkError(describe(err), err);
        if (attempt >= maxAttempts) throw error;
        await this.o.sleep(this.backoffMs(attempt));
        continue;
      }

      const headersOut: Record<string, string> = {};
      res.headers.forEach((v, k) => (headersOut[k] = v));
      let body: unknown = null;
      try {
        body = responseText ? JSON.parse(responseText) : null;
      } catch {
        body = responseText;
      }
      if (res.status >= 500) this.breaker?.failure(ticket);
      else this.breaker?.answered(ticket);

      if (res.status >= 200 && res.status < 300) {
        return { status: res.status, headers: headersOut, body: body as B, text: responseText, requestId: headersOut['x-request-id'] ?? null, attempts: attempt };
      }
      const error = errorFromResponse(res.status, body, headersOut);
      const wait = attempt < maxAttempts ? this.retryWait(attempt, res.status, error) : null;
      if (wait === null) throw error;
      await this.o.sleep(wait);
    }
  }

  private retryWait(attempt: number, status: number, error: PixgateError): number | null {
    if (status === 429) {
      const seconds = Number(error.headers['retry-after']);
      const ms = Number.isFinite(seconds) ? seconds * 1000 : this.backoffMs(attempt);
      return ms > this.o.maxRetryAfterMs ? null : ms;
    }
    if (status === 409 && error.code === 'idempotency_in_progress') return this.backoffMs(attempt);
    if (RETRYABLE_STATUS.has(status)) {
      const seconds = Number(error.headers['retry-after']);
      return Number.isFinite(seconds) && seconds * 1000 <= this.o.maxRetryAfterMs ? Math.max(seconds * 1000, this.backoffMs(attempt)) : this.backoffMs(attempt);
    }
    return null;
  }

  private async call<R>(method: string, path: string, options: RequestOptions = {}): Promise<R> {
    return (await this.request<R>(method, path, options)).body;
  }

  // ---- account ----
  balance(): Promise<Cased<T.Balance, C>> {
    return this.call('GET', '/balance');
  }
  validateCpf(cpf: string, options?: RequestOptions): Promise<Cased<T.CpfValidation, C>> {
    return this.call('POST', '/cpf/validate', { ...options, body: { cpf } });
  }

  // ---- PIX ----
  readonly pix = {
    cashOut: (input: Cased<T.CashOutInput, C>, options?: RequestOptions): Promise<Cased<T.CashOutResult, C>> => this.call('POST', '/pix/cash-out', { ...options, body: input }),
    refund: (input: Cased<T.RefundInput, C>, options?: RequestOptions): Promise<Cased<T.RefundResult, C>> => this.call('POST', '/pix/refund', { ...options, body: input }),
    getRefund: (id: string): Promise<Cased<T.RefundResult, C>> => this.call('GET', `/pix/refund/${encodeURIComponent(id)}`),
    createCharge: (input: Cased<T.ChargeInput, C>, options?: RequestOptions): Promise<Cased<T.Charge, C>> => this.call('POST', '/pix/cash-in', { ...options, body: input }),
    getCharge: (id: string): Promise<Cased<T.Charge, C>> => this.call('GET', `/pix/cash-in/${encodeURIComponent(id)}`),
    keys: (): Promise<Cased<T.PixKeyList, C>> => this.call('GET', '/pix/keys'),
  };

  // ---- TEF (transfers between accounts of this institution) ----
  readonly tef = {
    transfer: (input: Cased<T.TefInput, C>, options?: RequestOptions): Promise<Cased<T.TefResult, C>> => this.call('POST', '/tef/transfers', { ...options, body: input }),
  };

  // ---- statement and transactions ----
  statement(params: Cased<T.ListParams, C> = {} as Cased<T.ListParams, C>): Promise<Cased<T.Page<T.StatementItem>, C>> {
    return this.call('GET', '/statement', { query: params as RequestOptions['query'] });
  }
  /** Every statement item, page after page (`for await (const item of client.statementItems())`). */
  statementItems(params: Cased<T.ListParams, C> = {} as Cased<T.ListParams, C>): AsyncGenerator<Cased<T.StatementItem, C>> {
    return this.pages('/statement', params as Record<string, unknown>);
  }
  transactions(params: Cased<T.ListParams, C> = {} as Cased<T.ListParams, C>): Promise<Cased<T.Page<T.TransactionRecord>, C>> {
    return this.call('GET', '/transactions', { query: params as RequestOptions['query'] });
  }
  transactionItems(params: Cased<T.ListParams, C> = {} as Cased<T.ListParams, C>): AsyncGenerator<Cased<T.TransactionRecord, C>> {
    return this.pages('/transactions', params as Record<string, unknown>);
  }
  transaction(id: string): Promise<Cased<T.TransactionRecord, C>> {
    return this.call('GET', `/transactions/${encodeURIComponent(id)}`);
  }
  transactionByEndToEndId(e2eId: string): Promise<Cased<T.TransactionRecord, C>> {
    return this.call('GET', `/transactions/e2e/${encodeURIComponent(e2eId)}`);
  }
  transactionByTag(tag: string): Promise<Cased<T.TransactionRecord, C>> {
    return this.call('GET', `/transactions/tag/${encodeURIComponent(tag)}`);
  }
  transactionByExternalId(externalId: string): Promise<Cased<T.TransactionRecord, C>> {
    return this.call('GET', `/transactions/ref/${encodeURIComponent(externalId)}`);
  }
  receipt(id: string): Promise<Cased<T.Receipt, C>> {
    return this.call('GET', `/transactions/${encodeURIComponent(id)}/receipt`);
  }

  // ---- MED ----
  readonly med = {
    list: (params: Cased<T.MedListParams, C> = {} as Cased<T.MedListParams, C>): Promise<Cased<T.Page<T.Infraction>, C>> => this.call('GET', '/med', { query: params as RequestOptions['query'] }),
    items: (params: Cased<T.MedListParams, C> = {} as Cased<T.MedListParams, C>): AsyncGenerator<Cased<T.Infraction, C>> => this.pages('/med', params as Record<string, unknown>),
    get: (id: string): Promise<Cased<T.Infraction, C>> => this.call('GET', `/med/${encodeURIComponent(id)}`),
    defend: (id: string, input: Cased<T.DefenseInput, C>, options?: RequestOptions): Promise<Cased<T.Infraction, C>> =>
      this.call('POST', `/med/${encodeURIComponent(id)}/defense`, { ...options, body: input }),
  };

  // ---- webhooks ----
  readonly webhooks = {
    create: (input: Cased<T.WebhookInput, C>, options?: RequestOptions): Promise<Cased<T.Webhook, C>> => this.call('POST', '/webhooks', { ...options, body: input }),
    list: (): Promise<Cased<T.Webhook[], C>> => this.call('GET', '/webhooks'),
    delete: async (id: string): Promise<void> => {
      await this.request('DELETE', `/webhooks/${encodeURIComponent(id)}`);
    },
    catalog: (): Promise<Cased<T.CatalogEvent[], C>> => this.call('GET', '/webhooks/events'),
  };

  // ---- events feed ----
  readonly events = {
    list: (params: T.FeedParams = {}): Promise<Cased<T.FeedPage, C>> => this.call('GET', '/events', { query: feedQuery(params) }),
    /** Every event after `after`, page after page, until the feed is caught up. */
    all: (params: T.FeedParams = {}): AsyncGenerator<Cased<T.FeedEvent, C>> => this.feedAll(params),
    /** The live stream (Server-Sent Events), reconnecting after `Last-Event-ID` until `signal` aborts. */
    stream: (params: T.FeedParams & { signal?: AbortSignal; onOpen?: () => void } = {}): AsyncGenerator<Cased<T.FeedEvent, C>> => this.feedStream(params),
  };

  private async *pages<I>(path: string, params: Record<string, unknown>): AsyncGenerator<I> {
    const perPage = Number(params.per_page ?? params.perPage ?? 100);
    for (let page = Number(params.page ?? 1); ; page++) {
      const res = await this.call<{ data: I[] }>('GET', path, { query: { ...(params as RequestOptions['query']), page, [this.o.keyCase === 'camel' ? 'perPage' : 'per_page']: perPage } });
      for (const item of res.data) yield item;
      if (res.data.length < perPage) return;
    }
  }

  private async *feedAll(params: T.FeedParams): AsyncGenerator<any> {
    let after = params.after ?? 0;
    for (;;) {
      const page = await this.call<{ events: T.FeedEvent[]; has_more?: boolean; hasMore?: boolean; next_after?: number; nextAfter?: number }>('GET', '/events', {
        query: feedQuery({ ...params, after }),
      });
      for (const e of page.events) yield e;
      after = page.next_after ?? page.nextAfter ?? after;
      if (!(page.has_more ?? page.hasMore)) return;
    }
  }

  private async *feedStream(params: T.FeedParams & { signal?: AbortSignal; onOpen?: () => void }): AsyncGenerator<any> {
    let lastId: string | undefined = params.after === undefined ? undefined : String(params.after);
    let failures = 0;
    while (!params.signal?.aborted) {
      const headers: Record<string, string> = { authorization: `ApiKey ${this.o.clientId}:${this.o.clientSecret}`, accept: 'text/event-stream' };
      if (this.o.keyCase === 'camel') headers['x-key-case'] = 'camelCase';
      if (lastId !== undefined) headers['last-event-id'] = lastId;
      const q = feedQuery({ ...(params.type ? { type: params.type } : {}) });
      let res: Response;
      try {
        res = await this.o.fetch(`${this.o.baseUrl}/api/external/events/stream${queryString(q)}`, { headers, ...(params.signal ? { signal: params.signal } : {}) });
      } catch (err) {
        if (params.signal?.aborted) return;
        if (++failures > this.o.maxRetries) throw new NetworkError(describe(err), err);
        await this.o.sleep(this.backoffMs(failures));
        continue;
      }
      if (res.status !== 200) {
        const text = await res.text();
        let body: unknown = text;
        try {
          body = JSON.parse(text);
        } catch {
          /* not JSON */
        }
        const headersOut: Record<string, string> = {};
        res.headers.forEach((v, k) => (headersOut[k] = v));
        const error = errorFromResponse(res.status, body, headersOut);
        if (res.status < 500 || ++failures > this.o.maxRetries) throw error;
        await this.o.sleep(this.backoffMs(failures));
        continue;
      }
      failures = 0;
      params.onOpen?.();
      try {
        for await (const msg of readSse(res.body!)) {
          if (msg.id !== undefined) lastId = msg.id;
          if (msg.data) yield JSON.parse(msg.data);
        }
      } catch (err) {
        if (params.signal?.aborted) return;
        if (++failures > this.o.maxRetries) throw new NetworkError(describe(err), err);
      }
      if (params.signal?.aborted) return;
      await this.o.sleep(this.backoffMs(Math.max(1, failures)));
    }
  }
}

function feedQuery(p: T.FeedParams): RequestOptions['query'] {
  return {
    ...(p.after !== undefined ? { after: p.after } : {}),
    ...(p.limit !== undefined ? { limit: p.limit } : {}),
    ...(p.type && p.type.length ? { type: p.type.join(',') } : {}),
  };
}

function queryString(q: RequestOptions['query']): string {
  if (!q) return '';
  const sp = new URLSearchParams();
  for (const [k, v] of Object.entries(q)) {
    if (v === undefined) continue;
    if (Array.isArray(v)) for (const x of v) sp.append(k, String(x));
    else sp.append(k, String(v));
  }
  const s = sp.toString();
  return s ? `?${s}` : '';
}

function describe(err: unknown): string {
  const e = err as { message?: string; cause?: { code?: string; message?: string } };
  const cause = e.cause?.code ?? e.cause?.message;
  return cause ? `${e.message ?? 'fetch failed'} (${cause})` : (e.message ?? String(err));
}

/** Server-Sent Events from a response body. */
export async function* readSse(body: ReadableStream<Uint8Array>): AsyncGenerator<{ id?: string; event?: string; data: string }> {
  const reader = body.getReader();
  const decoder = new TextDecoder();
  let buffer = '';
  let pendingCr = '';
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      // A CR at the end of a chunk may be the first half of a CRLF: kept until the next chunk.
      const text = pendingCr + decoder.decode(value, { stream: true });
      pendingCr = text.endsWith('\r') ? '\r' : '';
      buffer += (pendingCr ? text.slice(0, -1) : text).replace(/\r\n?/g, '\n');
      let i: number;
      while ((i = buffer.indexOf('\n\n')) >= 0) {
        const block = buffer.slice(0, i);
        buffer = buffer.slice(i + 2);
        const msg: { id?: string; event?: string; data: string } = { data: '' };
        const data: string[] = [];
        for (const line of block.split('\n')) {
          if (line.startsWith(':')) continue;
          const colon = line.indexOf(':');
          const field = colon < 0 ? line : line.slice(0, colon);
          const value = colon < 0 ? '' : line.slice(colon + 1).replace(/^ /, '');
          if (field === 'id') msg.id = value;
          else if (field === 'event') msg.event = value;
          else if (field === 'data') data.push(value);
        }
        msg.data = data.join('\n');
        if (msg.data || msg.id) yield msg;
      }
    }
  } finally {
    reader.releaseLock();
  }
}
