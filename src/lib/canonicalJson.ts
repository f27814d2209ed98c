/**
 * Canonical JSON (the bytes an HMAC signature covers) lives in the SDK package,
 * `@pixgate/sdk/canonical-json` (packages/sdk/src/canonicalJson.ts): clients sign with it and the
 * server verifies with the very same code, and the SDK imports nothing of the server's. The
 * server's modules import it from here.
 */
export * from '@pixgate/sdk/canonical-json';
