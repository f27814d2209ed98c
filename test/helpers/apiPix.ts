import type { MerchantFixture } from './client.js';

export interface PixRes {
  status: number;
  headers: Headers;
  text: string;
  body: any;
}

async function read(res: Response): Promise<PixRes> {
  const text = await res.text();
  let body: unknown = null;
  try {
    body = text ? JSON.parse(text) : null;
  } catch {
    body = text;
  }
  return { status: res.status, headers: res.headers, text, body };
}

/** POST /api/pix/oauth/token as an OAuth2 client does (Basic credentials, form body). */
export async function requestToken(baseUrl: string, clientId: string, clientSecret: string, form: Record<string, string> = { grant_type: 'client_credentials' }, headers: Record<string, string> = {}): Promise<PixRes> {
  const res = await fetch(`${baseUrl}/api/pix/oauth/token`, {
    method: 'POST',
    headers: {
      authorization: `Basic ${Buffer.from(`${clientId}:${clientSecret}`).toString('base64')}`,
      'content-type': 'application/x-www-form-urlencoded',
      ...headers,
    },
    body: new URLSearchParams(form).toString(),
  });
  return read(res);
}

/** A client of the façade with its bearer token. */
export class PixClient {
  constructor(
    readonly baseUrl: string,
    readonly token: string,
  ) {}

  async call(method: string, path: string, body?: unknown, headers: Record<string, string> = {}): Promise<PixRes> {
    const text = body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body);
    const res = await fetch(`${this.baseUrl}/api/pix/v2${path}`, {
      method,
      headers: { authorization: `Bearer ${this.token}`, ...(text !== undefined ? { 'content-type': 'application/json' } : {}), ...headers },
      ...(text !== undefined ? { body: text } : {}),
    });
    return read(res);
  }
  get(path: string) {
    return this.call('GET', path);
  }
  put(path: string, body: unknown) {
    return this.call('PUT', path, body);
  }
  post(path: string, body: unknown) {
    return this.call('POST', path, body);
  }
  patch(path: string, body: unknown) {
    return this.call('PATCH', path, body);
  }
  delete(path: string) {
    return this.call('DELETE', path);
  }
}

/** A token for a merchant fixture's key (all its grantable scopes, or `scope`) and a client using it. */
export async function pixClientFor(baseUrl: string, m: MerchantFixture, scope?: string): Promise<PixClient> {
  const res = await requestToken(baseUrl, m.client.clientId, m.client.clientSecret, { grant_type: 'client_credentials', ...(scope ? { scope } : {}) });
  if (res.status !== 200) throw new Error(`token: ${res.status} ${res.text}`);
  return new PixClient(baseUrl, res.body.access_token);
}
