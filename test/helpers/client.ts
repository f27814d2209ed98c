import { randomBytes } from 'node:crypto';
import { signV1, signV2 } from '../../src/auth/hmac.js';
import { canonicalize } from '../../src/lib/canonicalJson.js';
import { PERMISSIONS } from '../../src/auth/permissions.js';
import { validCnpj } from './fixtures.js';
import type { TestServer } from './server.js';

export interface Res {
  status: number;
  headers: Headers;
  text: string;
  body: any;
}

export interface SendOptions {
  headers?: Record<string, string>;
  /** 'v1' (default for POST), 'v2', or false to send no signature. */
  sign?: 'v1' | 'v2' | false;
  idempotencyKey?: string;
  nonce?: string;
  timestamp?: number;
  /** Overrides the signature header value. */
  hmac?: string;
  contentType?: string;
  camelCase?: boolean;
}

/** A merchant integration as the spec describes one: API key auth, signed POSTs. */
export class ApiClient {
  constructor(
    readonly baseUrl: string,
    readonly clientId: string,
    readonly clientSecret: string,
  ) {}

  authHeader(): string {
    return `ApiKey ${this.clientId}:${this.clientSecret}`;
  }

  async get(path: string, options: SendOptions = {}): Promise<Res> {
    return this.request('GET', path, undefined, { sign: false, ...options });
  }

  async delete(path: string, options: SendOptions = {}): Promise<Res> {
    return this.request('DELETE', path, undefined, { sign: false, ...options });
  }

  async post(path: string, body: unknown, options: SendOptions = {}): Promise<Res> {
    return this.request('POST', path, body, options);
  }

  /** Signature headers for a body text, as a client computes them. */
  signatureHeaders(method: string, path: string, text: string, options: SendOptions): Record<string, string> {
    const sign = options.sign ?? 'v1';
    const headers: Record<string, string> = {};
    if (options.idempotencyKey !== undefined) headers['idempotency-key'] = options.idempotencyKey;
    if (sign === 'v1' && options.hmac === undefined) headers.hmac = signV1(this.clientSecret, canonicalize(text));
    if (sign === 'v2') {
      const timestamp = String(options.timestamp ?? Math.floor(Date.now() / 1000));
      const nonce = options.nonce ?? randomBytes(16).toString('hex');
      const idempotencyKey = options.idempotencyKey ?? `idem-${randomBytes(8).toString('hex')}`;
      Object.assign(headers, {
        'x-signature-version': '2',
        'x-request-timestamp': timestamp,
        'x-request-nonce': nonce,
        'idempotency-key': idempotencyKey,
        hmac: signV2(this.clientSecret, {
          timestamp,
          nonce,
          method,
          path: `/api/external${path.split('?')[0]}`,
          idempotencyKey,
          canonicalBody: canonicalize(text),
        }),
      });
    }
    if (options.hmac !== undefined) headers.hmac = options.hmac;
    return headers;
  }

  async request(method: string, path: string, body: unknown, options: SendOptions = {}): Promise<Res> {
    const text = body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body);
    const headers: Record<string, string> = { authorization: this.authHeader() };
    if (text !== undefined) headers['content-type'] = options.contentType ?? 'application/json';
    if (options.camelCase) headers['x-key-case'] = 'camelCase';
    if (text !== undefined && options.sign !== false) Object.assign(headers, this.signatureHeaders(method, path, text, options));
    else if (options.idempotencyKey !== undefined) headers['idempotency-key'] = options.idempotencyKey;
    Object.assign(headers, options.headers);
    for (const [k, v] of Object.entries(headers)) if (v === '__omit__') delete headers[k];
    const res = await fetch(`${this.baseUrl}/api/external${path}`, { method, headers, ...(text !== undefined ? { body: text } : {}) });
    const responseText = await res.text();
    let parsed: unknown = null;
    try {
      parsed = responseText ? JSON.parse(responseText) : null;
    } catch {
      parsed = responseText;
    }
    return { status: res.status, headers: res.headers, text: responseText, body: parsed };
  }
}

export interface MerchantFixture {
  merchantId: number;
  accountId: number;
  client: ApiClient;
}

/** A merchant, its account (optionally funded) and an API key. */
export async function merchantWithKey(
  server: TestServer,
  options: { name?: string; permissions?: string[]; ipWhitelist?: string[]; hmac?: boolean; expiresAt?: string; depositCents?: number; accountScoped?: boolean } = {},
): Promise<MerchantFixture> {
  const m = await server.admin('POST', '/merchants', { name: options.name ?? 'Loja Teste', document: validCnpj() });
  if (m.status !== 201) throw new Error(`merchant: ${JSON.stringify(m.body)}`);
  const k = await server.admin('POST', '/api-keys', {
    merchant_id: m.body.merchant_id,
    ...(options.accountScoped === false ? {} : { account_id: m.body.account_id }),
    permissions: options.permissions ?? [...PERMISSIONS],
    ip_whitelist: options.ipWhitelist ?? ['127.0.0.1', '::1'],
    ...(options.hmac === false ? { hmac: false } : {}),
    ...(options.expiresAt ? { expires_at: options.expiresAt } : {}),
  });
  if (k.status !== 201) throw new Error(`api key: ${JSON.stringify(k.body)}`);
  if (options.depositCents) {
    const d = await server.admin('POST', `/accounts/${m.body.account_id}/deposits`, { amount: options.depositCents });
    if (d.status !== 201) throw new Error(`deposit: ${JSON.stringify(d.body)}`);
  }
  return { merchantId: m.body.merchant_id, accountId: m.body.account_id, client: new ApiClient(server.url, k.body.client_id, k.body.client_secret) };
}

/** Registers a PIX key of this institution for an account (operator API); returns the key. */
export async function addPixKey(server: TestServer, accountId: number, type: string, key?: string): Promise<string> {
  const res = await server.admin('POST', '/pix-keys', { account_id: accountId, type, ...(key ? { key } : {}) });
  if (res.status !== 201) throw new Error(`pix key: ${JSON.stringify(res.body)}`);
  return res.body.key;
}
