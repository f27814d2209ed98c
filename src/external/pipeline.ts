import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { authenticate } from '../auth/credentials.js';
import type { Permission } from '../auth/permissions.js';
import type { AppContext } from '../context.js';
import { resolveClientIp } from '../http/clientIp.js';
import { credentialsRefused, pipelineError, SHAPE1, type HttpError } from '../http/errors.js';
import { camelCaseErrorBody, convertKeys, snakeToCamel } from '../lib/keyCase.js';
import type { IdempotencyBinding, IdempotencyClaim } from './idempotency.js';
import { logSignatureRefusal } from './signatureDebug.js';
import { contentTypeStage } from './stages/contentType.js';
import { credentialsStage } from './stages/credentials.js';
import { idempotencyKeyStage } from './stages/idempotencyKey.js';
import { ipWhitelistStage, whitelistRefusal } from './stages/ipWhitelist.js';
import { keyCaseStage } from './stages/keyCase.js';
import { permissionRefusal, permissionStage } from './stages/permission.js';
import { rateLimitStage } from './stages/rateLimit.js';
import { auth, header } from './stages/request.js';
import { signatureStage } from './stages/signature.js';
import type { ExternalState, Phase, PipelineDeps, Stage } from './stages/stage.js';

export type { ExternalState, PipelineDeps } from './stages/stage.js';

/**
 * The request pipeline of the external API, in the spec's order ("Request pipeline" table). Every
 * request under /api/external runs these stages; the first failing one answers, before any business
 * logic. Stages 1-4 need no body and run as soon as the request arrives (an unauthenticated body is
 * never read); 5-8 run once the body has been received. Each stage is a file of src/external/stages/.
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
export const STAGES: readonly Stage[] = [
  contentTypeStage,
  keyCaseStage,
  credentialsStage,
  ipWhitelistStage,
  signatureStage,
  rateLimitStage,
  permissionStage,
  idempotencyKeyStage,
];

/** Route options of external routes (`config` of a Fastify route). */
export interface ExternalRouteConfig {
  /** The permission the route requires; null for routes the spec gives none (authentication only). */
  permission: Permission | null;
  /** false for GET /balance, which the spec exempts from the rate limiter. */
  rateLimit?: boolean;
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
  const result = await authenticate((clientId) => ctx.credentials.apiKey(ctx.db, clientId), ctx.wallClock, header(req, 'authorization'));
  if (!('key' in result)) return credentialsRefused(result.refused);
  const key = result.key;
  if (key.client_id !== started.client_id || key.merchant_id !== started.merchant_id || key.account_id !== started.account_id || key.operating_account_id !== started.operating_account_id) {
    return pipelineError(403, SHAPE1.accountInactive);
  }
  return whitelistRefusal(key, req.ext.clientIp) ?? permissionRefusal(key, req.routeOptions.config.permission ?? null);
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

  installAnswerSide(app, idempotency);
}

/** The answer side: key case, the rate-limit and Idempotency-Key headers, and the claim settled. */
function installAnswerSide(app: FastifyInstance, idempotency: PipelineDeps['idempotency']) {
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
