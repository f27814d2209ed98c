import { createHmac } from 'node:crypto';

/**
 * Standard Webhooks headers (https://www.standardwebhooks.com): every delivery also carries
 *
 *   webhook-id         the delivery id (same on every attempt and re-send: receivers de-duplicate on it)
 *   webhook-timestamp  Unix seconds of this attempt (receivers refuse stale ones: replay protection)
 *   webhook-signature  `v1,<base64 HMAC-SHA256 of "<id>.<timestamp>.<body>">`
 *
 * The HMAC key is derived from the webhook's secret the way the published verifiers derive it:
 * a secret of the form `whsec_<standard base64>` (what pixgate generates) is keyed with the decoded
 * bytes, so `new Webhook(secret)` (npm `standardwebhooks`) and `Webhook(secret)` (Python) work with
 * the secret exactly as the merchant received it. Any other secret (one the merchant chose, or one
 * generated before this change, base64url) is keyed with its UTF-8 bytes: verifiers take it raw
 * (`new Webhook(secret, {format: 'raw'})`, Python `Webhook(secret.encode())`).
 */
export const STANDARD_WEBHOOKS_PREFIX = 'whsec_';

/** Canonical padded standard base64 of at least 16 bytes. */
const STANDARD_BASE64 = /^(?:[A-Za-z0-9+/]{4})+(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/;

export type StandardWebhooksKeyFormat = 'base64' | 'raw';

/**
 * Why a secret the merchant chose cannot be registered, or undefined: a secret that starts with
 * `whsec_` claims the Standard Webhooks form and must be exactly that — canonical padded standard
 * base64 of at least 16 bytes — or verifiers would derive different keys from it (the published
 * ones decode leniently, pixgate and its SDK would key it raw).
 */
export function webhookSecretProblem(secret: string): string | undefined {
  if (!secret.startsWith(STANDARD_WEBHOOKS_PREFIX)) return undefined;
  return standardWebhooksKey(secret).format === 'base64'
    ? undefined
    : 'a secret starting with whsec_ must be whsec_ followed by the standard base64 (padded, canonical) of at least 16 bytes; choose another secret or omit it to have one generated';
}

/** The key Standard Webhooks signatures use for a webhook secret, and how it was derived. */
export function standardWebhooksKey(secret: string): { key: Buffer; format: StandardWebhooksKeyFormat } {
  if (secret.startsWith(STANDARD_WEBHOOKS_PREFIX)) {
    const rest = secret.slice(STANDARD_WEBHOOKS_PREFIX.length);
    if (STANDARD_BASE64.test(rest)) {
      const key = Buffer.from(rest, 'base64');
      if (key.length >= 16 && key.toString('base64') === rest) return { key, format: 'base64' };
    }
  }
  return { key: Buffer.from(secret, 'utf8'), format: 'raw' };
}

/** `v1,<base64 HMAC-SHA256 of id.timestamp.body>`. */
export function standardWebhookSignature(key: Buffer, id: string, timestampSeconds: number, body: string | Buffer): string {
  const mac = createHmac('sha256', key).update(`${id}.${timestampSeconds}.`).update(body).digest('base64');
  return `v1,${mac}`;
}

/** The three headers of one attempt. */
export function standardWebhookHeaders(secret: string, id: string, timestampSeconds: number, body: string | Buffer): Record<string, string> {
  return {
    'webhook-id': id,
    'webhook-timestamp': String(timestampSeconds),
    'webhook-signature': standardWebhookSignature(standardWebhooksKey(secret).key, id, timestampSeconds, body),
  };
}
