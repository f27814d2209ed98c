import type { FastifyRequest } from 'fastify';
import type { Authenticated } from '../../auth/credentials.js';
import { signatureMatches, signedPath, signV1, signV2, v2SigningString, V2 } from '../../auth/hmac.js';
import { NonceStoreUnavailableError } from '../../auth/nonceStore.js';
import { badRequest, HMAC_DETAIL, workedFalse } from '../../http/errors.js';
import { CanonicalJsonError, JsonContentError, parseCanonical } from '../../lib/canonicalJson.js';
import { camelToSnake, convertKeys } from '../../lib/keyCase.js';
import { invalidSignature } from '../signatureDebug.js';
import { auth, header, rateLimited, rateWindow } from './request.js';
import type { PipelineDeps, Stage } from './stage.js';

const NONCE_TTL_SECONDS = 2 * V2.toleranceSeconds;

/** Strict UTF-8 (throws on invalid bytes); one instance, as decode() without `stream` keeps no state. */
const UTF8 = new TextDecoder('utf-8', { fatal: true });

type SignedBody = ReturnType<typeof parseCanonical>;
type ParsedBody = { ok: true; value: unknown } | { ok: false; error: unknown };

function rawBody(body: unknown): string | null {
  if (body === undefined || body === null) return null;
  if (Buffer.isBuffer(body)) {
    try {
      return UTF8.decode(body);
    } catch {
      return '\uFFFD'; // not UTF-8: reported as invalid JSON
    }
  }
  return typeof body === 'string' ? body : null;
}

/** The signed body as data: null-prototype objects, integer-ness from the text (see parseJson). */
function parseBody(signed: SignedBody): ParsedBody {
  try {
    return { ok: true, value: signed.value() };
  } catch (error) {
    return { ok: false, error };
  }
}

/** The request's body from here on: the signed body's value (key case applied) and its canonical form. */
function setBody(req: FastifyRequest, canonical: string, parsed: ParsedBody): void {
  req.ext.canonicalBody = canonical;
  if (!parsed.ok) {
    if (parsed.error instanceof JsonContentError) throw badRequest(parsed.error.message);
    throw parsed.error;
  }
  req.body = req.ext.camelCase ? convertKeys(parsed.value, camelToSnake) : parsed.value;
}

/** X-Signature-Version: none, or an explicit `1`, is v1; `2` is v2 (homologation: v2 only). */
function signatureVersion(req: FastifyRequest, deps: PipelineDeps): '1' | '2' {
  const { appEnv } = deps.ctx.config;
  const versionHeader = header(req, 'x-signature-version');
  const version = versionHeader === undefined ? '1' : versionHeader.trim();
  if (version !== '1' && version !== '2') {
    throw workedFalse(400, appEnv === 'homologation' ? 'X-Signature-Version must be 2' : 'X-Signature-Version must be 1 or 2');
  }
  if (version === '1' && appEnv === 'homologation') throw workedFalse(401, HMAC_DETAIL.v2Required);
  return version;
}

/** The body, read once: its canonical form now, its value from the same parse later. */
function signedBody(req: FastifyRequest): SignedBody {
  const raw = rawBody(req.body);
  if (raw === null || raw.trim() === '') throw workedFalse(400, HMAC_DETAIL.bodyRequired);
  try {
    return parseCanonical(raw);
  } catch (err) {
    if (err instanceof CanonicalJsonError) throw workedFalse(400, HMAC_DETAIL.bodyNotJson);
    throw err;
  }
}

/** Stage 5: the body's HMAC signature, v1 or v2 (v2 adds a timestamp, a one-time nonce and the key). */
export const signatureStage: Stage = {
  n: 5,
  name: 'hmac',
  phase: 'preHandler',
  applies: (req) => req.method === 'POST',
  async run(req, _reply, deps) {
    const { key, clientSecret } = auth(req);
    if (!key.hmac_enabled) throw workedFalse(403, HMAC_DETAIL.notConfigured);
    const version = signatureVersion(req, deps);
    const signature = header(req, 'hmac');
    if (!signature) throw workedFalse(401, HMAC_DETAIL.missing);
    const signed = signedBody(req);
    if (version === '2') return verifyV2(req, deps, { key, clientSecret }, signature, signed);
    if (!signatureMatches(signature, signV1(clientSecret, signed.canonical))) throw invalidSignature(req, deps.ctx, 'v1', signed.canonical);
    setBody(req, signed.canonical, parseBody(signed));
  },
};

/** Stage 5 for signature version 2: timestamp, nonce, Idempotency-Key, signature, then the nonce's claim. */
async function verifyV2(req: FastifyRequest, deps: PipelineDeps, { key, clientSecret }: Authenticated, signature: string, signed: SignedBody) {
  const { ctx } = deps;
  const timestamp = header(req, 'x-request-timestamp') ?? '';
  if (!/^\d{1,12}$/.test(timestamp)) throw workedFalse(400, 'X-Request-Timestamp must be Unix time in seconds');
  // Whole seconds on both sides: exactly 300 s old and exactly 300 s ahead are both accepted.
  const nowSeconds = Math.floor(ctx.wallClock.now().getTime() / 1000);
  if (Math.abs(nowSeconds - Number(timestamp)) > V2.toleranceSeconds) {
    throw workedFalse(401, 'Request timestamp is outside the 300-second tolerance');
  }
  const nonce = header(req, 'x-request-nonce') ?? '';
  if (!V2.nonce.test(nonce)) {
    throw workedFalse(400, 'X-Request-Nonce must be 16 to 128 characters from A-Z a-z 0-9 . _ ~ -');
  }
  const idempotencyKey = header(req, 'idempotency-key') ?? '';
  if (idempotencyKey.length < V2.idempotencyKeyMin || idempotencyKey.length > V2.idempotencyKeyMax) {
    throw workedFalse(400, 'Idempotency-Key is required with signature version 2 (8 to 256 characters)');
  }
  const parts = { timestamp, nonce, method: req.method, path: signedPath(req.url), idempotencyKey, canonicalBody: signed.canonical };
  const expected = signV2(clientSecret, parts);
  if (!signatureMatches(signature, expected)) throw invalidSignature(req, ctx, 'v2', v2SigningString(parts));
  // The body is parsed before the nonce is claimed only so that a request that will pass
  // stage 5 can be counted by stage 6 in the claim's own Redis round trip; the answers and
  // their order are unchanged: a body refused here still consumes its nonce, is answered 409
  // on a conflicting nonce first, and is never counted by the limiter.
  const parsed = parseBody(signed);
  const claim = await claimNonce(req, deps, key.client_id, nonce, expected, new Date(Number(timestamp) * 1000), parsed.ok && rateLimited(req));
  if (claim === 'conflict') throw workedFalse(409, 'X-Request-Nonce was already used for a different request');
  setBody(req, signed.canonical, parsed);
}

/** Claims a v2 nonce; with `count`, and one Redis for both, stage 6 counts the request in the same round trip. */
async function claimNonce(req: FastifyRequest, deps: PipelineDeps, clientId: string, nonce: string, expected: string, signedAt: Date, count: boolean) {
  const combined = count ? deps.nonceAndRate : undefined;
  try {
    if (!combined) return await deps.nonces.claim(clientId, nonce, expected, NONCE_TTL_SECONDS, signedAt);
    const both = await combined.nonces.claimAndHit(clientId, nonce, expected, NONCE_TTL_SECONDS, signedAt, combined.counter, rateWindow(req, deps.ctx));
    req.ext.rateLimitCounted = both.hit;
    return both.claim;
  } catch (err) {
    if (err instanceof NonceStoreUnavailableError) {
      req.log.error({ err: err.message }, 'nonce store unavailable');
      throw workedFalse(503, 'Replay protection is unavailable; the request was not executed', { 'retry-after': '5' });
    }
    throw err;
  }
}
