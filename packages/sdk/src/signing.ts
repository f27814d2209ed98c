import { canonicalize } from './canonicalJson.js';

/**
 * Request signatures, with WebCrypto only (Node 20+, browsers, edge runtimes):
 *   v1: hex HMAC-SHA512 of the canonical body, key = client_secret.
 *   v2: hex HMAC-SHA512 of `v2\n<timestamp>\n<nonce>\n<METHOD>\n<path>\n<idempotency key>\n<canonical body>`.
 * The canonical body is computed by the same code the server verifies with (./canonicalJson.ts, which
 * the server imports as `@pixgate/sdk/canonical-json`).
 */
export { canonicalize };

const encoder = new TextEncoder();

function subtle(): typeof globalThis.crypto.subtle {
  const s = globalThis.crypto?.subtle;
  if (!s) throw new Error('WebCrypto (globalThis.crypto.subtle) is required');
  return s;
}

export function hex(bytes: ArrayBuffer | Uint8Array): string {
  const b = bytes instanceof Uint8Array ? bytes : new Uint8Array(bytes);
  let out = '';
  for (const x of b) out += x.toString(16).padStart(2, '0');
  return out;
}

/** Bytes as WebCrypto's BufferSource (DOM's types want an ArrayBuffer-backed view, not a SharedArrayBuffer one). */
export function bufferSource(bytes: string | Uint8Array): Uint8Array<ArrayBuffer> {
  return (typeof bytes === 'string' ? encoder.encode(bytes) : bytes) as Uint8Array<ArrayBuffer>;
}

export async function hmacHex(hash: 'SHA-256' | 'SHA-512', key: string | Uint8Array, message: string | Uint8Array): Promise<string> {
  const k = await subtle().importKey('raw', bufferSource(key), { name: 'HMAC', hash }, false, ['sign']);
  return hex(await subtle().sign('HMAC', k, bufferSource(message)));
}

export async function sha256Hex(text: string): Promise<string> {
  return hex(await subtle().digest('SHA-256', encoder.encode(text)));
}

/** 32 random characters from the nonce alphabet (16 bytes, hex). */
export function newNonce(): string {
  return hex(globalThis.crypto.getRandomValues(new Uint8Array(16)));
}

export function newIdempotencyKey(): string {
  return `sdk-${globalThis.crypto.randomUUID()}`;
}

export type SignatureVersion = 'v1' | 'v2';

export interface SignInput {
  version: SignatureVersion;
  clientSecret: string;
  method: string;
  /** The full path, `/api/external/...`, without the query. */
  path: string;
  /** The body text exactly as it will be sent. */
  body: string;
  idempotencyKey?: string;
  /** Unix seconds (v2); default now. */
  timestamp?: number;
  nonce?: string;
}

export interface SignedHeaders {
  headers: Record<string, string>;
  /** The string the HMAC covers (v1: the canonical body; v2: the signing string). */
  signedString: string;
  canonicalBody: string;
}

/** The signature headers of a request (and the strings they cover, for `pixgate sign --explain`). */
export async function signRequest(input: SignInput): Promise<SignedHeaders> {
  const canonicalBody = canonicalize(input.body);
  if (input.version === 'v1') {
    const headers: Record<string, string> = { hmac: await hmacHex('SHA-512', input.clientSecret, canonicalBody) };
    if (input.idempotencyKey) headers['idempotency-key'] = input.idempotencyKey;
    return { headers, signedString: canonicalBody, canonicalBody };
  }
  const timestamp = String(input.timestamp ?? Math.floor(Date.now() / 1000));
  const nonce = input.nonce ?? newNonce();
  const idempotencyKey = input.idempotencyKey ?? newIdempotencyKey();
  const signedString = ['v2', timestamp, nonce, input.method.toUpperCase(), input.path.split('?')[0], idempotencyKey, canonicalBody].join('\n');
  return {
    headers: {
      'x-signature-version': '2',
      'x-request-timestamp': timestamp,
      'x-request-nonce': nonce,
      'idempotency-key': idempotencyKey,
      hmac: await hmacHex('SHA-512', input.clientSecret, signedString),
    },
    signedString,
    canonicalBody,
  };
}
