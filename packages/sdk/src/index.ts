/**
 * @pixgate/sdk — a typed client of pixgate's merchant API (`/api/external`), for Node 20+ and
 * runtimes with fetch and WebCrypto (browsers, edge). See docs/sdk.md.
 */
export { Pixgate, readSse, type ApiResponse, type PixgateOptions, type RequestOptions } from './client.js';
export { CircuitBreaker, type BreakerOptions } from './breaker.js';
export * from './errors.js';
export { canonicalize, hmacHex, newIdempotencyKey, newNonce, sha256Hex, signRequest, type SignatureVersion, type SignedHeaders, type SignInput } from './signing.js';
export { standardWebhooksKey, verifyWebhook, WebhookVerificationError, type VerifiedWebhook, type VerifyWebhookOptions } from './webhooks.js';
export type * from './types.js';
export { SDK_ROUTES } from './routes.js';
