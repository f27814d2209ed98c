/**
 * Canonical JSON (the bytes an HMAC signature covers) lives in the SDK, src/sdk/canonicalJson.ts:
 * clients sign with it and the server verifies with the very same code, and the SDK imports
 * nothing of the server's. The server's modules import it from here.
 */
export * from '../sdk/canonicalJson.js';
