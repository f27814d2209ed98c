import { notFoundHandler } from '../http/errorHandler.js';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { tefAdminRoutes } from '../api/tef/routes.js';
import { createApiKey, updateApiKey, apiKeyView } from '../auth/apiKeys.js';
import { revokeKey } from '../auth/keyLifecycle.js';
import { createCentralKey } from '../auth/centralKeys.js';
import { constantTimeEqual } from '../auth/secrets.js';
import type { AppContext } from '../context.js';
import { resolveClientIp } from '../http/clientIp.js';
import { businessError, HttpError } from '../http/errors.js';
import type { WindowHit } from '../ratelimit/fixedWindow.js';
import { parseOrThrow } from '../http/validation.js';
import type { AccountRow } from '../merchants/repository.js';
import * as merchants from '../merchants/service.js';
import type { Balances } from '../ledger/ledger.js';
import { registerOwnKey } from '../pix/ownKeys.js';
import { whitelistWarnings } from '../auth/ipWhitelist.js';
import * as S from './schemas.js';
import { adminApi as api } from './admin.api.js';
import { mount } from '../http/routeSpec.js';
import { webhookAdminRoutes } from '../api/webhooks/admin.routes.js';
import { auditOperatorWrites, auditView, listAuditRows, markOperator } from './auditLog.js';

/** The operator API (contract section 3), under /api/admin, behind `Authorization: Bearer <ADMIN_TOKEN>`. */
export function adminRoutes(ctx: AppContext) {
  return async function plugin(app: FastifyInstance) {
    app.addHook('onRequest', requireAdminToken(ctx));
    auditOperatorWrites(app, ctx);
    app.setNotFoundHandler(notFoundHandler);

    auditLogRoutes(app, ctx);
    merchantAccountRoutes(app, ctx);
    apiKeyRoutes(app, ctx);
    pixAndCentralKeyRoutes(app, ctx);
    await webhookAdminRoutes(app, ctx);
    await tefAdminRoutes(app, ctx);
  };
}

/** The audit log of the operators' writes, a page at a time. */
function auditLogRoutes(app: FastifyInstance, ctx: AppContext) {
  mount(app, api.auditLog, async (req) => {
    const q = parseOrThrow(S.auditLogQuery, req.query);
    const limit = q.limit ?? 50;
    const rows = await listAuditRows(ctx.db, { before: q.before, limit });
    return { entries: rows.map(auditView), next_before: rows.length === limit ? rows[rows.length - 1]!.id : null };
  });
}

/** Merchants and their accounts: create, read, change, deposit. */
function merchantAccountRoutes(app: FastifyInstance, ctx: AppContext) {
  mount(app, api.createMerchant, async (req, reply) => {
    const body = parseOrThrow(S.createMerchant, req.body);
    const { merchant, account } = await merchants.createMerchant(ctx.db, body);
    return reply.code(201).send({
      merchant_id: merchant.id,
      account_id: account.id,
      name: merchant.name,
      document: merchant.document,
      status: merchant.status,
    });
  });

  mount(app, api.getAccount, async (req) => {
    const { account_id } = parseOrThrow(S.accountIdParam, req.params);
    const view = await merchants.getAccount(ctx.db, account_id);
    return accountView(view.account, view.balances);
  });

  mount(app, api.patchAccount, async (req) => {
    const { account_id } = parseOrThrow(S.accountIdParam, req.params);
    const patch = parseOrThrow(S.patchAccount, req.body);
    const view = await merchants.updateAccount(ctx.db, account_id, patch);
    // Other processes hear it from the trigger's NOTIFY; this one forgets at once (docs/decisions.md).
    if (patch.status !== undefined) ctx.credentials.invalidate(`account:${account_id}`);
    return accountView(view.account, view.balances);
  });

  mount(app, api.deposit, async (req, reply) => {
    const { account_id } = parseOrThrow(S.accountIdParam, req.params);
    const body = parseOrThrow(S.deposit, req.body);
    const idempotencyKey = S.depositIdempotencyKey(req.headers['idempotency-key']);
    const result = await merchants.deposit(ctx.db, ctx.clock, {
      accountId: account_id,
      amountCents: body.amount,
      ...(body.description !== undefined ? { description: body.description } : {}),
      ...(idempotencyKey !== undefined ? { idempotencyKey } : {}),
    });
    if (result.replayed) void reply.header('idempotent-replayed', 'true');
    return reply.code(201).send({ transaction_id: result.transactionId, amount: result.amount });
  });
}

/** The merchants' API keys: create, change, revoke (each change drops the key from the credential cache). */
function apiKeyRoutes(app: FastifyInstance, ctx: AppContext) {
  mount(app, api.createApiKey, async (req, reply) => {
    const body = parseOrThrow(S.createApiKey, req.body);
    const { key, clientSecret } = await createApiKey(ctx.db, {
      merchantId: body.merchant_id,
      accountId: body.account_id ?? null,
      permissions: body.permissions,
      ipWhitelist: body.ip_whitelist,
      expiresAt: body.expires_at ? new Date(body.expires_at) : null,
      hmac: body.hmac ?? true,
    });
    const warnings = whitelistWarnings(key.ip_whitelist);
    const { client_id, ...view } = apiKeyView(key);
    return reply.code(201).send({
      client_id,
      client_secret: clientSecret,
      ...view,
      ...(warnings.length ? { warnings } : {}),
    });
  });

  mount(app, api.patchApiKey, async (req) => {
    const { client_id } = parseOrThrow(S.clientIdParam, req.params);
    const body = parseOrThrow(S.patchApiKey, req.body);
    const key = await updateApiKey(ctx.db, client_id, {
      ...(body.permissions !== undefined ? { permissions: body.permissions } : {}),
      ...(body.ip_whitelist !== undefined ? { ipWhitelist: body.ip_whitelist } : {}),
      ...(body.expires_at !== undefined ? { expiresAt: body.expires_at === null ? null : new Date(body.expires_at) } : {}),
      ...(body.api_pix_certificate_sha256 !== undefined ? { apiPixCertSha256: body.api_pix_certificate_sha256 } : {}),
    });
    ctx.credentials.invalidate(`key:${client_id}`);
    const warnings = whitelistWarnings(key.ip_whitelist);
    return { ...apiKeyView(key), ...(warnings.length ? { warnings } : {}) };
  });

  mount(app, api.revokeApiKey, async (req) => {
    const { client_id } = parseOrThrow(S.clientIdParam, req.params);
    // The merchant hears of it (api_key.revoked) and its audit log records it; creation by the
    // operator is the merchant's onboarding and fires nothing (docs/decisions.md, issue 28).
    const ip = resolveClientIp(req.socket.remoteAddress ?? '', req.headers['x-forwarded-for'], ctx.config.trustedProxies);
    const key = await revokeKey(ctx, { type: 'operator', id: 'admin-api', ip }, null, client_id);
    ctx.credentials.invalidate(`key:${client_id}`);
    return { client_id: key.client_id, active: key.active };
  });
}

/** An account's own PIX keys and the central keys. */
function pixAndCentralKeyRoutes(app: FastifyInstance, ctx: AppContext) {
  mount(app, api.createPixKey, async (req, reply) => {
    const body = parseOrThrow(S.createPixKey, req.body);
    const row = await registerOwnKey(ctx.db, ctx.rail, { accountId: body.account_id, type: body.type, key: body.key });
    return reply.code(201).send({ account_id: row.account_id, type: row.type, key: row.key });
  });

  mount(app, api.createCentralKey, async (req, reply) => {
    const body = parseOrThrow(S.createCentralKey, req.body);
    const { apiKey, accountId } = await createCentralKey(ctx.db, body.name, body.account_id ?? null);
    return reply.code(201).send({ api_key: apiKey, name: body.name, account_id: accountId });
  });
}

/** The spec's limit for authentication endpoints: failed admin/sandbox authentications per minute per address. */
export const ADMIN_AUTH_FAILURES_PER_MINUTE = 5;

/**
 * Bearer ADMIN_TOKEN check of /api/admin and /api/sandbox, compared in constant time. Failed
 * attempts are counted per client address: past 5 in a minute the answer is 429 (the right token
 * still passes, so an attacker cannot lock the operator out, only stop guessing).
 */
export function requireAdminToken(ctx: AppContext) {
  const token = ctx.config.adminToken;
  return async function checkAdminToken(req: FastifyRequest) {
    const header = req.headers.authorization;
    const presented = typeof header === 'string' && header.startsWith('Bearer ') ? header.slice(7) : '';
    if (presented !== '' && constantTimeEqual(presented, token)) {
      markOperator(req);
      return;
    }
    const ip = resolveClientIp(req.socket.remoteAddress ?? '', req.headers['x-forwarded-for'], ctx.config.trustedProxies);
    let hit: WindowHit | undefined;
    try {
      hit = await ctx.rateCounter.hit(`admin-auth-failure:${ip}`, ADMIN_AUTH_FAILURES_PER_MINUTE, 60);
    } catch (err) {
      req.log.warn({ err: (err as Error).message }, 'admin authentication limiter unavailable');
    }
    if (hit && !hit.allowed) {
      throw new HttpError(
        429,
        { errors: { rate_limited: 'Too many failed admin authentications from this address; retry later' } },
        { 'retry-after': String(hit.retryAfter) },
      );
    }
    throw businessError(401, 'unauthorized', 'Missing or invalid admin token');
  };
}

export function accountView(account: AccountRow, balances: Balances) {
  return {
    account_id: account.id,
    merchant_id: account.merchant_id,
    status: account.status,
    balance: balances.available,
    balances: {
      available: balances.available,
      blocked: balances.blocked,
      pending: balances.pending,
      ledger_total: balances.ledgerTotal,
      safe: balances.safe,
    },
    cash_out_fee_cents: account.cash_out_fee_cents,
    cash_in_fee_cents: account.cash_in_fee_cents,
    cash_out_max_amount_cents: account.cash_out_max_amount_cents,
    cash_out_daily_limit_cents: account.cash_out_daily_limit_cents,
    cash_out_nighttime_limit_cents: account.cash_out_nighttime_limit_cents,
    created_at: account.created_at.toISOString(),
    updated_at: account.updated_at.toISOString(),
  };
}
