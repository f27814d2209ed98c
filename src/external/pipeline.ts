import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { whitelistAllows } from '../auth/ipWhitelist.js';
import { authenticate, type Authenticated } from '../auth/credentials.js';
import { signatureMatches, signedPath, signV1, signV2, v2SigningString, V2 } from '../auth/hmac.js';
import { NonceStoreUnavailableError, type combinedNonceAndRate, type NonceStore } from '../auth/nonceStore.js';
import type { Permission } from '../auth/permissions.js';
import type { AppContext } from '../context.js';
import { resolveClientIp } from '../http/clientIp.js';
import { badRequest, credentialsRefused, HMAC_DETAIL, permissionError, pipelineError, SHAPE1, workedFalse, type HttpError } from '../http/errors.js';
import { CanonicalJsonError, JsonContentError, parseCanonical } from '../lib/canonicalJson.js';
import { camelCaseErrorBody, camelToSnake, convertKeys, snakeToCamel } from '../lib/keyCase.js';
import type { FixedWindowCounter, WindowHit } from '../ratelimit/fixedWindow.js';
import { invalidSignature, logSignatureRefusal } from './signatureDebug.js';
import { requestHash, type IdempotencyBinding, type IdempotencyClaim, type IdempotencyStore } from './idempotency.js';

/**
 * The request pipeline of the external API, in the spec's order ("Request pipeline" table). Every
 * request under /api/external runs these stages; the first failing one answers, before any business
 * logic. Stages 1-4 need no body and run as soon as the request arrives (an unauthenticated body is
 * never read); 5-8 run once the body has been received.
 *
 *   #  stage            methods            failure
 *   1  content type     POST/PUT/PATCH     415 shape 1 (+ hint)
 *   2  X-Key-Case       all                —
 *   3  credentials      all                401 shape 1
 *   4  IP whitelist     all                403 shape 1
 *   5  HMAC signature   POST               400/401/403 shape 3, 409/503 (v2 nonce)
 *   6  rate limit       all but /balance   429 shape 1, Retry-After: 60
 *   7  permission       all                403 shape 2
 *   8  idempotency      POST               400 shape 1; replay of a stored 2xx answer
 */

/** Route options of external routes (`config` of a Fastify route). */
export interface ExternalRouteConfig {
  /** The permission the route requires; null for routes the spec gives none (authentication only). */
  permission: Permission | null;
  /** false for GET /balance, which the spec exempts from the rate limiter. */
  rateLimit?: boolean;
}

/** What the pipeline learned about a request, for the stages after it and the handler. */
export interface ExternalState {
  camelCase: boolean;
  clientIp: string;
  auth?: Authenticated;
  canonicalBody?: string;
  rateLimit?: WindowHit;
  /** Stage 6's hit, when stage 5 counted the request with its nonce claim (one Redis round trip). */
  rateLimitCounted?: WindowHit;
  idempotencyKey?: string;
  claim?: IdempotencyClaim;
}

/** The authenticated caller, as handlers see it. */
export interface Principal {
  clientId: string;
  merchantId: number;
  /** The account the key operates on (its own, or the merchant's first account). */
  accountId: number;
  /** The key's own account, null for a merchant-wide key (webhooks registered with it are global). */
  keyAccountId: number | null;
  permissions: readonly string[];
}

declare module 'fastify' {
  interface FastifyRequest {
    ext: ExternalState;
  }
  interface FastifyContextConfig {
    permission?: Permission | null;
    rateLimit?: boolean;
  }
}

export interface PipelineDeps {
  ctx: AppContext;
  nonces: NonceStore;
  rateLimiter: FixedWindowCounter;
  idempotency: IdempotencyStore;
  /** Set when nonces and rate-limit counters are one Redis (combinedNonceAndRate). */
  nonceAndRate?: ReturnType<typeof combinedNonceAndRate>;
}

type Phase = 'onRequest' | 'preHandler';
interface Stage {
  n: number;
  name: string;
  phase: Phase;
  applies(req: FastifyRequest): boolean;
  /**
   * Throws an HttpError to answer, returns 'answered' when it sent a reply itself. Stages with
   * nothing to wait for are plain functions: the pipeline awaits only what is a promise.
   */
  run(req: FastifyRequest, reply: FastifyReply, deps: PipelineDeps): void | 'answered' | Promise<void | 'answered'>;
}

const BODY_METHODS = new Set(['POST', 'PUT', 'PATCH']);
const ACCEPTED_MEDIA_TYPES = new Set(['application/json', 'multipart/form-data']);
const NONCE_TTL_SECONDS = 2 * V2.toleranceSeconds;

function header(req: FastifyRequest, name: string): string | undefined {
  const v = req.headers[name];
  return Array.isArray(v) ? v[0] : v;
}

function hasBody(req: FastifyRequest): boolean {
  const length = header(req, 'content-length');
  return (length !== undefined && length !== '0') || header(req, 'transfer-encoding') !== undefined;
}

/** Stage 6 applies: every route but those the spec exempts (GET /balance). */
function rateLimited(req: FastifyRequest): boolean {
  return req.routeOptions.config.rateLimit !== false;
}

/** The limiter's window for a request: per client IP, RATE_LIMIT_PER_MINUTE a minute. */
function rateWindow(req: FastifyRequest, ctx: AppContext) {
  return { key: `ext:${req.ext.clientIp}`, limit: ctx.config.rateLimitPerMinute, windowSeconds: 60 };
}

type ParsedBody = { ok: true; value: unknown } | { ok: false; error: unknown };

/** The signed body as data: null-prototype objects, integer-ness from the text (see parseJson). */
function parseBody(signed: ReturnType<typeof parseCanonical>): ParsedBody {
  try {
    return { ok: true, value: signed.value() };
  } catch (error) {
    return { ok: false, error };
  }
}

function setBody(req: FastifyRequest, parsed: ParsedBody): void {
  if (!parsed.ok) {
    if (parsed.error instanceof JsonContentError) throw badRequest(parsed.error.message);
    throw parsed.error;
  }
  req.body = req.ext.camelCase ? convertKeys(parsed.value, camelToSnake) : parsed.value;
}

function auth(req: FastifyRequest): Authenticated {
  if (!req.ext.auth) throw new Error('pipeline stage ran before authentication');
  return req.ext.auth;
}

/** Stage 4's refusal of `key` from `clientIp` (whitelist, then the account and merchant status). */
function whitelistRefusal(key: Authenticated['key'], clientIp: string): HttpError | undefined {
  if (key.ip_whitelist.length === 0) return pipelineError(403, SHAPE1.emptyWhitelist);
  if (!whitelistAllows(key.ip_whitelist, clientIp)) return pipelineError(403, SHAPE1.ipNotListed);
  if (key.operating_account_id === null || key.account_status !== 'active' || key.merchant_status !== 'active') {
    return pipelineError(403, SHAPE1.accountInactive);
  }
  return undefined;
}

/** Stage 7's refusal of `key` for a route requiring `permission` (null: authentication only). */
function permissionRefusal(key: Authenticated['key'], permission: Permission | null): HttpError | undefined {
  return permission !== null && !key.permissions.includes(permission) ? permissionError(permission) : undefined;
}

/**
 * For answers that last (the live events stream): stages 3, 4 and 7 again, now, for the
 * credentials this request presented — what a new request with them would be refused with, or
 * undefined while they still hold. The key is read through the credential cache, which a change
 * anywhere (revoked, expired, account or merchant deactivated, permissions or whitelist patched)
 * invalidates at once (`auth_changed`), so a check costs no statement while nothing changes. A key
 * that now operates on another account than when the request started is refused too.
 */
export async function recheckCredentials(req: FastifyRequest, ctx: AppContext): Promise<HttpError | undefined> {
  const started = auth(req).key;
  const result = await authenticate((clientId) => ctx.credentials.apiKey(ctx.db, clientId), ctx.clock, header(req, 'authorization'));
  if (!('key' in result)) return credentialsRefused(result.refused);
  const key = result.key;
  if (key.client_id !== started.client_id || key.merchant_id !== started.merchant_id || key.account_id !== started.account_id || key.operating_account_id !== started.operating_account_id) {
    return pipelineError(403, SHAPE1.accountInactive);
  }
  return whitelistRefusal(key, req.ext.clientIp) ?? permissionRefusal(key, req.routeOptions.config.permission ?? null);
}

export const STAGES: readonly Stage[] = [
  {
    n: 1,
    name: 'content-type',
    phase: 'onRequest',
    applies: (req) => BODY_METHODS.has(req.method) && hasBody(req),
    run(req) {
      const mediaType = (header(req, 'content-type') ?? '').split(';')[0]!.trim().toLowerCase();
      if (!ACCEPTED_MEDIA_TYPES.has(mediaType)) {
        throw pipelineError(415, SHAPE1.unsupportedMediaType, {
          hint:
            mediaType === 'application/x-www-form-urlencoded'
              ? 'curl -d sends application/x-www-form-urlencoded by default; add -H "Content-Type: application/json"'
              : 'Send the body as JSON with the header Content-Type: application/json',
        });
      }
    },
  },
  {
    n: 2,
    name: 'key-case',
    phase: 'onRequest',
    applies: () => true,
    run(req) {
      req.ext.camelCase = (header(req, 'x-key-case') ?? '').trim().toLowerCase() === 'camelcase';
      if (req.ext.camelCase && req.query && typeof req.query === 'object') {
        req.query = convertKeys(req.query, camelToSnake);
      }
    },
  },
  {
    n: 3,
    name: 'credentials',
    phase: 'onRequest',
    applies: () => true,
    async run(req, _reply, { ctx }) {
      const result = await authenticate((clientId) => ctx.credentials.apiKey(ctx.db, clientId), ctx.clock, header(req, 'authorization'));
      if (!('key' in result)) throw credentialsRefused(result.refused);
      req.ext.auth = result;
    },
  },
  {
    n: 4,
    name: 'ip-whitelist',
    phase: 'onRequest',
    applies: () => true,
    run(req) {
      const refused = whitelistRefusal(auth(req).key, req.ext.clientIp);
      if (refused) throw refused;
    },
  },
  {
    n: 5,
    name: 'hmac',
    phase: 'preHandler',
    applies: (req) => req.method === 'POST',
    async run(req, _reply, deps) {
      const { ctx } = deps;
      const { key, clientSecret } = auth(req);
      if (!key.hmac_enabled) throw workedFalse(403, HMAC_DETAIL.notConfigured);
      // No X-Signature-Version, or an explicit `1`, is v1; `2` is v2 (homologation: v2 only).
      const versionHeader = header(req, 'x-signature-version');
      const version = versionHeader === undefined ? '1' : versionHeader.trim();
      if (version !== '1' && version !== '2') {
        throw workedFalse(400, ctx.config.appEnv === 'homologation' ? 'X-Signature-Version must be 2' : 'X-Signature-Version must be 1 or 2');
      }
      if (version === '1' && ctx.config.appEnv === 'homologation') throw workedFalse(401, HMAC_DETAIL.v2Required);
      const signature = header(req, 'hmac');
      if (!signature) throw workedFalse(401, HMAC_DETAIL.missing);
      const raw = rawBody(req.body);
      if (raw === null || raw.trim() === '') throw workedFalse(400, HMAC_DETAIL.bodyRequired);
      // The body is read once: its canonical form now, its value from the same parse below.
      let signed: ReturnType<typeof parseCanonical>;
      try {
        signed = parseCanonical(raw);
      } catch (err) {
        if (err instanceof CanonicalJsonError) throw workedFalse(400, HMAC_DETAIL.bodyNotJson);
        throw err;
      }
      const canonical = signed.canonical;

      if (version === '1') {
        if (!signatureMatches(signature, signV1(clientSecret, canonical))) throw invalidSignature(req, ctx, 'v1', canonical);
      } else {
        const timestamp = header(req, 'x-request-timestamp') ?? '';
        if (!/^\d{1,12}$/.test(timestamp)) throw workedFalse(400, 'X-Request-Timestamp must be Unix time in seconds');
        // Whole seconds on both sides: exactly 300 s old and exactly 300 s ahead are both accepted.
        const nowSeconds = Math.floor(ctx.clock.now().getTime() / 1000);
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
        const parts = { timestamp, nonce, method: req.method, path: signedPath(req.url), idempotencyKey, canonicalBody: canonical };
        const expected = signV2(clientSecret, parts);
        if (!signatureMatches(signature, expected)) throw invalidSignature(req, ctx, 'v2', v2SigningString(parts));
        // The body is parsed before the nonce is claimed only so that a request that will pass
        // stage 5 can be counted by stage 6 in the claim's own Redis round trip; the answers and
        // their order are unchanged: a body refused here still consumes its nonce, is answered 409
        // on a conflicting nonce first, and is never counted by the limiter.
        const parsed = parseBody(signed);
        const combined = parsed.ok && rateLimited(req) ? deps.nonceAndRate : undefined;
        let claim;
        try {
          if (combined) {
            const both = await combined.nonces.claimAndHit(key.client_id, nonce, expected, NONCE_TTL_SECONDS, combined.counter, rateWindow(req, ctx));
            claim = both.claim;
            req.ext.rateLimitCounted = both.hit;
          } else {
            claim = await deps.nonces.claim(key.client_id, nonce, expected, NONCE_TTL_SECONDS);
          }
        } catch (err) {
          if (err instanceof NonceStoreUnavailableError) {
            req.log.error({ err: err.message }, 'nonce store unavailable');
            throw workedFalse(503, 'Replay protection is unavailable; the request was not executed', { 'retry-after': '5' });
          }
          throw err;
        }
        if (claim === 'conflict') throw workedFalse(409, 'X-Request-Nonce was already used for a different request');
        req.ext.canonicalBody = canonical;
        setBody(req, parsed);
        return;
      }
      req.ext.canonicalBody = canonical;
      setBody(req, parseBody(signed));
    },
  },
  {
    n: 6,
    name: 'rate-limit',
    phase: 'preHandler',
    applies: rateLimited,
    async run(req, _reply, { ctx, rateLimiter }) {
      let hit: WindowHit;
      try {
        // Counted already when stage 5 claimed a v2 nonce in the same Redis round trip.
        const window = req.ext.rateLimitCounted ?? rateWindow(req, ctx);
        hit = 'allowed' in window ? window : await rateLimiter.hit(window.key, window.limit, window.windowSeconds);
      } catch (err) {
        // The limiter protects capacity, not money: when its store is down, requests pass.
        req.log.warn({ err: (err as Error).message }, 'rate limiter unavailable; request allowed');
        return;
      }
      if (!hit.allowed) throw pipelineError(429, SHAPE1.rateLimited, {}, { 'retry-after': '60' });
      req.ext.rateLimit = hit;
    },
  },
  {
    n: 7,
    name: 'permission',
    phase: 'preHandler',
    applies: () => true,
    run(req) {
      const permission = req.routeOptions.config.permission;
      if (permission === undefined) throw new Error(`route ${req.routeOptions.url} declares no permission`);
      const refused = permissionRefusal(auth(req).key, permission);
      if (refused) throw refused;
    },
  },
  {
    n: 8,
    name: 'idempotency',
    phase: 'preHandler',
    applies: (req) => req.method === 'POST' && (header(req, 'idempotency-key') ?? '') !== '',
    async run(req, reply, { idempotency }) {
      const key = header(req, 'idempotency-key')!;
      if (key.length > 256) throw pipelineError(400, SHAPE1.idempotencyKeyTooLong);
      req.ext.idempotencyKey = key;
      const result = await idempotency.claim(
        { merchantId: auth(req).key.merchant_id, method: req.method, path: idempotencyScopePath(req), key },
        requestHash(req.ext.canonicalBody ?? ''),
      );
      switch (result.kind) {
        case 'claimed':
          req.ext.claim = result.claim;
          return;
        case 'replay':
          await reply
            .code(result.answer.statusCode)
            .header('content-type', 'application/json; charset=utf-8')
            .header('x-idempotent-replay', 'true')
            .send(result.answer.body);
          return 'answered';
        case 'mismatch':
          throw pipelineError(409, 'Idempotency-Key was already used with a different request body');
        case 'busy':
          throw pipelineError(409, 'A request with this Idempotency-Key is still being processed; retry later');
      }
    },
  },
];

/**
 * The route part of an idempotency scope: the route that runs (its pattern, e.g.
 * `/api/external/med/:id/defense`) and its decoded parameters — never the URL as spelled, so
 * `cash-out`, `cash%2Dout` and `%63ash-out` are one scope.
 */
export function idempotencyScopePath(req: FastifyRequest): string {
  const route = req.routeOptions.url ?? req.url.split('?')[0]!;
  const params = (req.params ?? {}) as Record<string, string>;
  const names = Object.keys(params).sort();
  return names.length === 0 ? route : `${route} ${JSON.stringify(names.map((n) => [n, params[n]]))}`;
}

/** Strict UTF-8 (throws on invalid bytes); one instance, as decode() without `stream` keeps no state. */
const UTF8 = new TextDecoder('utf-8', { fatal: true });

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

/** The principal of an authenticated request (call from handlers only). */
export function principal(req: FastifyRequest): Principal {
  const { key } = auth(req);
  return {
    clientId: key.client_id,
    merchantId: key.merchant_id,
    accountId: key.operating_account_id!,
    keyAccountId: key.account_id,
    permissions: key.permissions,
  };
}

/** The exact bytes a payload is sent as on this request (key case applied). */
export function serializeFor(req: FastifyRequest, payload: unknown): string {
  return JSON.stringify(req.ext.camelCase ? convertKeys(payload, snakeToCamel) : payload);
}

/**
 * For handlers whose operation writes: records the answer in the operation's own database
 * transaction, so an executed operation always has its idempotency record (no-op without an
 * Idempotency-Key). Call it last inside the transaction, with the status and payload the handler
 * will send.
 */
export async function recordAnswer(req: FastifyRequest, tx: Parameters<IdempotencyClaim['record']>[0], statusCode: number, payload: unknown) {
  if (req.ext.claim && statusCode >= 200 && statusCode < 300) {
    await req.ext.claim.record(tx, statusCode, serializeFor(req, payload));
  }
}

/**
 * For handlers whose operation creates a record and answers in a later transaction (cash-out,
 * refund): the request's Idempotency-Key as a binding — bind it to the record in the record's own
 * transaction, resume the bound record when an earlier attempt created one, record the answer.
 */
export function keyBinding(req: FastifyRequest): IdempotencyBinding {
  const claim = req.ext.claim;
  return {
    resumes: claim?.resumes ?? null,
    bind: async (tx, resourceId) => {
      if (claim) await claim.bind(tx, resourceId);
    },
    record: (tx, statusCode, payload) => recordAnswer(req, tx, statusCode, payload),
    claim: claim ? { id: claim.id, token: claim.token } : null,
    prepare: (statusCode, payload) => (claim && statusCode >= 200 && statusCode < 300 ? claim.prepare(statusCode, serializeFor(req, payload)) : null),
  };
}

/** Installs the stages as two ordered hooks, and the response side (key case, headers, idempotency). */
export function installPipeline(app: FastifyInstance, deps: PipelineDeps) {
  const { ctx, idempotency } = deps;
  const byPhase = (phase: Phase) => STAGES.filter((s) => s.phase === phase);
  const runPhase = (stages: readonly Stage[]) =>
    async function pipelinePhase(req: FastifyRequest, reply: FastifyReply) {
      for (const stage of stages) {
        // An unknown path is authenticated (stages 1-4) and then answered 404, nothing more.
        if (req.is404 && stage.phase === 'preHandler') continue;
        if (!stage.applies(req)) continue;
        let outcome: void | 'answered';
        try {
          const ran = stage.run(req, reply, deps);
          outcome = ran instanceof Promise ? await ran : ran;
        } catch (err) {
          if (stage.name === 'hmac') logSignatureRefusal(req, err);
          throw err;
        }
        if (outcome === 'answered') return reply;
      }
    };

  app.decorateRequest('ext', null as unknown as ExternalState);
  const onRequestStages = runPhase(byPhase('onRequest'));
  app.addHook('onRequest', function pipelineStart(req, reply) {
    req.ext = { camelCase: false, clientIp: resolveClientIp(req.socket.remoteAddress ?? '', req.headers['x-forwarded-for'], ctx.config.trustedProxies) };
    return onRequestStages(req, reply);
  });
  app.addHook('preHandler', runPhase(byPhase('preHandler')));

  // Bodies reach stage 5 as raw bytes: the signature covers them as transmitted.
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('*', { parseAs: 'buffer' }, (_req, body, done) => done(null, body));

  // camelCase clients get camelCase keys, and error texts that name fields as they sent them.
  app.addHook('preSerialization', (req, reply, payload, done) => {
    // An answer recorded in the operation's transaction was serialised then (key case applied) and
    // is the one sent (onSend): serialise it once, not a second time here.
    const recorded = req.ext?.claim?.recorded;
    if (recorded) {
      void reply.serializer(() => recorded.body);
      return done(null, payload);
    }
    if (!req.ext?.camelCase) return done(null, payload);
    let converted: unknown;
    try {
      converted = reply.statusCode >= 400 ? camelCaseErrorBody(payload) : convertKeys(payload, snakeToCamel);
    } catch (err) {
      return done(err as Error);
    }
    done(null, converted);
  });

  // Callback style: most answers hold no claim and go straight through, with no promise made.
  app.addHook('onSend', (req, reply, payload, done) => {
    const state = req.ext;
    if (!state) return done(null, payload);
    const ok = reply.statusCode >= 200 && reply.statusCode < 300;
    if (state.rateLimit && ok) void reply.header('x-ratelimit-remaining', String(state.rateLimit.remaining));
    if (state.idempotencyKey !== undefined) void reply.header('idempotency-key', state.idempotencyKey);
    const claim = state.claim;
    if (!claim) return done(null, payload);
    state.claim = undefined; // settle the claim once, even if onSend runs again for an error
    if (claim.recorded) {
      // The operation committed with this answer: it is the answer, whatever happened after.
      void reply.code(claim.recorded.statusCode);
      return done(null, claim.recorded.body);
    }
    // Anything else that is not a 2xx (a 4xx, a 5xx, a COMMIT that failed) frees the key.
    const settled =
      ok && typeof payload === 'string'
        ? idempotency.complete(claim, { statusCode: reply.statusCode, body: payload })
        : idempotency.release(claim);
    // A release never fails (it retries in the background); a completion that the database refuses
    // leaves the key claimed until its lease ends. Either way the answer stays the one given: an
    // error here would replace it with the driver's (and leak its text, hosts included).
    settled.then(
      () => done(null, payload),
      (err: Error) => {
        req.log.error({ err: err.message }, 'idempotency answer not stored');
        done(null, payload);
      },
    );
  });
}
