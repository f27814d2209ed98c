import { createHash } from 'node:crypto';
import type { FastifyRequest } from 'fastify';
import type { AppContext } from '../context.js';
import { HMAC_DETAIL, HttpError, workedFalse } from '../http/errors.js';

/**
 * Help for a refused signature, without weakening it: outside production the 401 carries
 * `X-Signature-Canonical-SHA256`, the SHA-256 (hex) of the exact string the server computed the
 * HMAC over (v1: the canonical body; v2: the v2 signing string). A client compares it with the hash
 * of the string it signed (`pixgate sign --explain` prints it): equal hashes mean the secret is
 * wrong, different ones that the body, path, timestamp, nonce or Idempotency-Key differ. The hash
 * is of data the client itself sent; no secret goes into it.
 */
export const CANONICAL_SHA256_HEADER = 'x-signature-canonical-sha256';

export function invalidSignature(req: FastifyRequest, ctx: Pick<AppContext, 'config'>, version: 'v1' | 'v2', signedString: string): HttpError {
  const sha256 = createHash('sha256').update(signedString, 'utf8').digest('hex');
  req.log.info({ signature_version: version, canonical_sha256: sha256 }, `signature refused: ${version} HMAC does not match the ${version === 'v1' ? 'canonical body' : 'signing string'}`);
  return workedFalse(401, HMAC_DETAIL.invalid, ctx.config.appEnv === 'production' ? {} : { [CANONICAL_SHA256_HEADER]: sha256 });
}

/** Every refusal of the signature stage is logged at info with its reason (the answer says little on purpose). */
export function logSignatureRefusal(req: FastifyRequest, err: unknown): void {
  if (!(err instanceof HttpError) || (err.statusCode === 401 && (err.body as { detail?: string })?.detail === HMAC_DETAIL.invalid)) return; // logged by invalidSignature
  const detail = (err.body as { detail?: unknown } | null)?.detail;
  req.log.info({ status: err.statusCode }, `signature refused: ${typeof detail === 'string' ? detail : 'see answer'}`);
}
