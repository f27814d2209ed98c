/** HTTP of the suite: signed merchant requests (v1/v2, as docs/signing.md) and operator calls, each with a deadline. */
import { randomBytes } from 'node:crypto';
import { signV1, signV2 } from '../../src/auth/hmac.js';
import { canonicalize } from '../../src/lib/canonicalJson.js';

export interface Answer {
  /** 0: no answer (connection refused/reset, or the client's deadline passed). */
  status: number;
  body: any;
  text: string;
  error?: string;
  /** The Retry-After header, when answered with one. */
  retryAfter?: string;
}

async function send(url: string, init: RequestInit, timeoutMs: number): Promise<Answer> {
  try {
    const res = await fetch(url, { ...init, signal: AbortSignal.timeout(timeoutMs) });
    const text = await res.text();
    let body: unknown = null;
    try {
      body = text ? JSON.parse(text) : null;
    } catch {
      body = text;
    }
    const retryAfter = res.headers.get('retry-after');
    return { status: res.status, body, text, ...(retryAfter !== null ? { retryAfter } : {}) };
  } catch (err) {
    return { status: 0, body: null, text: '', error: (err as Error).name === 'TimeoutError' ? 'client timeout' : String((err as Error).cause ?? (err as Error).message) };
  }
}

/**
 * The clock v2 signatures are stamped with, as an offset from this process's clock: the harness
 * moves it with the wall-clock steps it gives the servers (both ends stepped by NTP), so v2
 * requests are not refused as stale for a step that the suite, not the client, made.
 */
export const clientClock = { offsetMs: 0 };

export class Merchant {
  constructor(
    public baseUrl: string,
    readonly merchantId: number,
    readonly accountId: number,
    readonly clientId: string,
    readonly clientSecret: string,
  ) {}

  /** A signed POST under /api/external. `sign` v2 always carries an Idempotency-Key (v2 signs it). */
  async post(path: string, body: unknown, o: { sign: 'v1' | 'v2'; idempotencyKey?: string; timeoutMs: number }): Promise<Answer> {
    const text = JSON.stringify(body);
    const headers: Record<string, string> = { authorization: `ApiKey ${this.clientId}:${this.clientSecret}`, 'content-type': 'application/json' };
    if (o.idempotencyKey !== undefined) headers['idempotency-key'] = o.idempotencyKey;
    if (o.sign === 'v1') headers.hmac = signV1(this.clientSecret, canonicalize(text));
    else {
      const timestamp = String(Math.floor((Date.now() + clientClock.offsetMs) / 1000));
      const nonce = randomBytes(16).toString('hex');
      const idempotencyKey = o.idempotencyKey ?? `v2-${randomBytes(8).toString('hex')}`;
      Object.assign(headers, {
        'x-signature-version': '2',
        'x-request-timestamp': timestamp,
        'x-request-nonce': nonce,
        'idempotency-key': idempotencyKey,
        hmac: signV2(this.clientSecret, { timestamp, nonce, method: 'POST', path: `/api/external${path}`, idempotencyKey, canonicalBody: canonicalize(text) }),
      });
    }
    return send(`${this.baseUrl}/api/external${path}`, { method: 'POST', headers, body: text }, o.timeoutMs);
  }

  async get(path: string, timeoutMs: number): Promise<Answer> {
    return send(`${this.baseUrl}/api/external${path}`, { method: 'GET', headers: { authorization: `ApiKey ${this.clientId}:${this.clientSecret}` } }, timeoutMs);
  }
}

export class Operator {
  constructor(
    public baseUrl: string,
    readonly token: string,
  ) {}
  call(prefix: 'admin' | 'sandbox', method: string, path: string, body: unknown, timeoutMs: number, headers: Record<string, string> = {}): Promise<Answer> {
    return send(
      `${this.baseUrl}/api/${prefix}${path}`,
      {
        method,
        headers: { authorization: `Bearer ${this.token}`, ...(body !== undefined ? { 'content-type': 'application/json' } : {}), ...headers },
        ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
      },
      timeoutMs,
    );
  }
  /** For set-up: throws unless 2xx. */
  async must(prefix: 'admin' | 'sandbox', method: string, path: string, body?: unknown): Promise<any> {
    const a = await this.call(prefix, method, path, body, 30_000);
    if (a.status < 200 || a.status >= 300) throw new Error(`${method} /api/${prefix}${path}: ${a.status} ${a.text || a.error}`);
    return a.body;
  }
}
