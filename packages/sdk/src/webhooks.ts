/**
 * Verifying pixgate webhook deliveries over the raw body, with WebCrypto (constant-time HMAC
 * verification by `subtle.verify`). Two signatures are accepted:
 *
 *   Standard Webhooks  webhook-id, webhook-timestamp, webhook-signature (`v1,<base64>` entries,
 *                      space-separated); the timestamp must be within `toleranceSeconds` of now
 *   X-Service-Signature  hex HMAC-SHA256 of the body keyed with the secret's UTF-8 bytes (no
 *                      timestamp: de-duplicate on X-Service-Delivery)
 *
 * By default the Standard Webhooks headers are required: they are what signs the timestamp (replay
 * protection) and the id to de-duplicate on, and pixgate sends them on every delivery. A delivery
 * with only X-Service-Signature — e.g. a captured old delivery with its `webhook-*` headers stripped —
 * is refused unless the caller chooses `requireTimestamp: false` (legacy receivers: no replay
 * protection, and the returned `id`, from X-Service-Delivery, is not covered by any signature).
 * When the Standard Webhooks headers are present they must verify (a stale or forged one is refused
 * even if X-Service-Signature is also sent).
 */
import { bufferSource } from './signing.js';

export class WebhookVerificationError extends Error {
  override name = 'WebhookVerificationError';
}

export type HeaderBag = Record<string, string | string[] | undefined> | Headers | Iterable<[string, string]>;

export interface VerifyWebhookOptions {
  /** The body exactly as received (Buffer, Uint8Array or string): never a re-serialized object. */
  rawBody: string | Uint8Array;
  headers: HeaderBag;
  /** The webhook's secret as pixgate gave it (`whsec_…`) or as chosen at registration. */
  secret: string;
  /** Default 300 s. */
  toleranceSeconds?: number;
  /**
   * Default true: refuse deliveries without the Standard Webhooks headers (signed timestamp and id:
   * replay protection). `false` also accepts X-Service-Signature alone — legacy mode, chosen
   * explicitly: no replay protection, and `id` is then unsigned.
   */
  requireTimestamp?: boolean;
  /** Current time in ms (tests). */
  now?: number;
}

export interface VerifiedWebhook<T = Record<string, unknown>> {
  event: T & { event: string; status: string };
  /** Which signature was checked. */
  scheme: 'standard-webhooks' | 'x-service-signature';
  /**
   * The delivery id (de-duplicate on it): signed with scheme `standard-webhooks`; with
   * `x-service-signature` (legacy mode only) it is the unsigned X-Service-Delivery header.
   */
  id: string | null;
  timestamp: number | null;
}

const encoder = new TextEncoder();
const STANDARD_BASE64 = /^(?:[A-Za-z0-9+/]{4})+(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/;

function lowerHeaders(h: HeaderBag): Map<string, string> {
  const out = new Map<string, string>();
  const entries: Iterable<[string, unknown]> =
    typeof (h as Headers).forEach === 'function' && typeof (h as Headers).get === 'function'
      ? (h as Headers).entries()
      : Symbol.iterator in (h as object)
        ? (h as Iterable<[string, string]>)
        : Object.entries(h as Record<string, unknown>);
  for (const [k, v] of entries) {
    if (v === undefined) continue;
    out.set(k.toLowerCase(), Array.isArray(v) ? String(v[0]) : String(v));
  }
  return out;
}

function base64ToBytes(b64: string): Uint8Array | null {
  try {
    const bin = atob(b64);
    const out = new Uint8Array(bin.length);
    for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
    return out;
  } catch {
    return null;
  }
}

function hexToBytes(hex: string): Uint8Array | null {
  if (!/^(?:[0-9a-fA-F]{2})+$/.test(hex)) return null;
  const out = new Uint8Array(hex.length / 2);
  for (let i = 0; i < out.length; i++) out[i] = parseInt(hex.slice(2 * i, 2 * i + 2), 16);
  return out;
}

function bytesToBase64(bytes: Uint8Array): string {
  let bin = '';
  for (const b of bytes) bin += String.fromCharCode(b);
  return btoa(bin);
}

/**
 * The Standard Webhooks key of a secret, derived exactly as the server derives it
 * (src/webhooks/standardWebhooks.ts): `whsec_<canonical padded standard base64 of ≥ 16 bytes>`
 * decoded, else the secret's UTF-8 bytes. Canonical: the text is what encoding the decoded bytes
 * gives back (no stray bits in the last character), so one secret never has two keys.
 */
export function standardWebhooksKey(secret: string): Uint8Array {
  if (secret.startsWith('whsec_')) {
    const rest = secret.slice(6);
    if (STANDARD_BASE64.test(rest)) {
      const key = base64ToBytes(rest);
      if (key && key.length >= 16 && bytesToBase64(key) === rest) return key;
    }
  }
  return encoder.encode(secret);
}

async function hmacVerify(key: Uint8Array, signature: Uint8Array, message: Uint8Array): Promise<boolean> {
  const k = await globalThis.crypto.subtle.importKey('raw', bufferSource(key), { name: 'HMAC', hash: 'SHA-256' }, false, ['verify']);
  return globalThis.crypto.subtle.verify('HMAC', k, bufferSource(signature), bufferSource(message));
}

function concat(...parts: Uint8Array[]): Uint8Array {
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let o = 0;
  for (const p of parts) {
    out.set(p, o);
    o += p.length;
  }
  return out;
}

/** Verifies a delivery and returns its parsed event; throws WebhookVerificationError otherwise. */
export async function verifyWebhook<T = Record<string, unknown>>(o: VerifyWebhookOptions): Promise<VerifiedWebhook<T>> {
  const body = typeof o.rawBody === 'string' ? encoder.encode(o.rawBody) : o.rawBody;
  const h = lowerHeaders(o.headers);
  const parse = () => {
    try {
      return JSON.parse(new TextDecoder().decode(body)) as VerifiedWebhook<T>['event'];
    } catch {
      throw new WebhookVerificationError('the body is not JSON');
    }
  };
  const id = h.get('webhook-id');
  const ts = h.get('webhook-timestamp');
  const sig = h.get('webhook-signature');
  if (id !== undefined || ts !== undefined || sig !== undefined) {
    if (!id || !ts || !sig) throw new WebhookVerificationError('incomplete Standard Webhooks headers');
    if (!/^\d{1,12}$/.test(ts)) throw new WebhookVerificationError('webhook-timestamp is not Unix seconds');
    const now = Math.floor((o.now ?? Date.now()) / 1000);
    const tolerance = o.toleranceSeconds ?? 300;
    if (Math.abs(now - Number(ts)) > tolerance) throw new WebhookVerificationError(`webhook-timestamp is more than ${tolerance} s away from now`);
    const message = concat(encoder.encode(`${id}.${ts}.`), body);
    const key = standardWebhooksKey(o.secret);
    for (const entry of sig.split(' ')) {
      const [version, value] = entry.split(',');
      if (version !== 'v1' || !value) continue;
      const bytes = base64ToBytes(value);
      if (bytes && bytes.length === 32 && (await hmacVerify(key, bytes, message))) {
        return { event: parse(), scheme: 'standard-webhooks', id, timestamp: Number(ts) };
      }
    }
    throw new WebhookVerificationError('no matching webhook-signature');
  }
  if (o.requireTimestamp ?? true) {
    throw new WebhookVerificationError(
      'Standard Webhooks headers (webhook-id, webhook-timestamp, webhook-signature) are required; pass requireTimestamp: false to accept X-Service-Signature alone, without replay protection',
    );
  }
  const service = h.get('x-service-signature');
  if (!service) throw new WebhookVerificationError('no signature header');
  const bytes = hexToBytes(service.trim());
  if (!bytes || bytes.length !== 32 || !(await hmacVerify(encoder.encode(o.secret), bytes, body))) {
    throw new WebhookVerificationError('X-Service-Signature does not match');
  }
  return { event: parse(), scheme: 'x-service-signature', id: h.get('x-service-delivery') ?? null, timestamp: null };
}
