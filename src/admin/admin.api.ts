import { z } from 'zod';
import { PERMISSIONS } from '../auth/permissions.js';
import { baseUnits, int, named, nonNegative, timestamp } from '../http/apiSchemas.js';
import { defineRoutes } from '../http/routeSpec.js';
import { PIX_KEY_TYPES } from '../pix/keys.js';
import * as S from './schemas.js';

/** The operator API (/api/admin): merchants, accounts, deposits, API keys, PIX keys, central keys. */
const Merchant = named(
  'MerchantCreated',
  z.object({ merchant_id: int, account_id: int, name: z.string(), document: z.string(), status: z.string() }),
);
const cents = nonNegative.describe('cents');
export const Account = named(
  'Account',
  z.object({
    account_id: int,
    merchant_id: int,
    status: z.enum(['active', 'inactive']),
    balance: baseUnits,
    balances: z.object({ available: baseUnits, blocked: baseUnits, pending: baseUnits, ledger_total: int, safe: int }),
    cash_out_fee_cents: cents,
    cash_in_fee_cents: cents,
    cash_out_max_amount_cents: cents.nullable(),
    cash_out_daily_limit_cents: cents.nullable(),
    cash_out_nighttime_limit_cents: cents.nullable(),
    created_at: timestamp,
    updated_at: timestamp,
  }),
);
const apiKeyFields = {
  client_id: z.string(),
  merchant_id: int,
  account_id: int.nullable(),
  permissions: z.array(z.enum(PERMISSIONS)),
  ip_whitelist: z.array(z.string()),
  hmac: z.boolean(),
  expires_at: timestamp.nullable(),
  api_pix_certificate_sha256: z.string().nullable().describe('API Pix mutual TLS: SHA-256 (hex) of the client certificate bound to the key (docs/api-pix.md)'),
  active: z.boolean(),
  created_at: timestamp,
  warnings: z.array(z.string()).optional().describe('ip_whitelist entries that will never match'),
};
const ApiKey = named('ApiKey', z.object(apiKeyFields));
const ApiKeyCreated = named('ApiKeyCreated', z.object({ ...apiKeyFields, client_secret: z.string().describe('Shown once') }));

const accountParams = { params: S.accountIdParam };
const clientParams = { params: S.clientIdParam };
const tag = 'Operator';
const notFound = (what: string) => ({ 404: { description: `${what} not found` } });

const AuditEntry = named(
  'AuditEntry',
  z.object({
    id: int,
    at: timestamp,
    actor: z.string().describe('`admin-token:` + the first 12 hex digits of the token’s SHA-256'),
    client_ip: z.string(),
    method: z.string(),
    route: z.string(),
    target: z.record(z.string(), z.unknown()).describe('Ids the write named or created (never secrets)'),
    request_id: z.string(),
    status: int.nullable().describe('The status answered; null when the operation committed and its answer was never recorded (the process stopped before answering)'),
  }),
);

export const adminApi = defineRoutes({
  auditLog: {
    method: 'GET',
    path: '/audit-log',
    operationId: 'adminAuditLog',
    tag,
    summary: 'The operator audit log: every authenticated write of the admin and sandbox APIs, newest first',
    query: S.auditLogQuery,
    responses: {
      200: { description: 'One page; next_before is the cursor of the next', schema: z.object({ entries: z.array(AuditEntry), next_before: int.nullable() }) },
    },
  },
  createMerchant: {
    method: 'POST',
    path: '/merchants',
    operationId: 'adminCreateMerchant',
    tag,
    summary: 'Create a merchant and its first account',
    body: S.createMerchant,
    bodyExample: { name: 'Padaria Central', document: '11222333000181' },
    responses: { 201: { description: 'Created', schema: Merchant }, 409: { description: 'A merchant with this document exists' } },
  },
  getAccount: {
    method: 'GET',
    path: '/accounts/:account_id',
    operationId: 'adminGetAccount',
    tag,
    summary: 'An account: status, balances, fees and limits',
    ...accountParams,
    responses: { 200: { description: 'The account', schema: Account }, ...notFound('account') },
  },
  patchAccount: {
    method: 'PATCH',
    path: '/accounts/:account_id',
    operationId: 'adminPatchAccount',
    tag,
    summary: 'Change an account’s status, fees or cash-out limits',
    ...accountParams,
    body: S.patchAccount,
    bodyExample: { cash_out_daily_limit_cents: 5_000_000 },
    responses: { 200: { description: 'The account', schema: Account }, ...notFound('account') },
  },
  deposit: {
    method: 'POST',
    path: '/accounts/:account_id/deposits',
    operationId: 'adminDeposit',
    tag,
    summary: 'Credit an account from the institution’s funding book',
    ...accountParams,
    body: S.deposit,
    bodyExample: { amount: 100000 },
    requestHeaders: [
      {
        name: 'Idempotency-Key',
        required: false,
        description: 'Makes the deposit safe to retry: the same key with the same body answers the first deposit again (1 to 256 printable ASCII characters)',
        schema: { type: 'string', pattern: '^[\\x21-\\x7e]{1,256}$' },
      },
    ],
    responses: {
      201: {
        description: 'Credited (amount in base units); the replay of an earlier deposit with the same Idempotency-Key carries `idempotent-replayed: true`',
        schema: z.object({ transaction_id: z.string(), amount: baseUnits }),
        headers: { 'idempotent-replayed': '`true` when this answer replays an earlier deposit' },
      },
      ...notFound('account'),
      409: { description: 'The Idempotency-Key was already used for a different deposit on this account' },
      422: { description: 'The account is inactive, or `amount_too_large`: the balance would exceed its maximum' },
    },
  },
  createApiKey: {
    method: 'POST',
    path: '/api-keys',
    operationId: 'adminCreateApiKey',
    tag,
    summary: 'Create a merchant API key (the secret is shown once)',
    body: S.createApiKey,
    bodyExample: { merchant_id: 2, permissions: ['transfer:write', 'transfer:read'], ip_whitelist: ['127.0.0.1'] },
    responses: { 201: { description: 'Created', schema: ApiKeyCreated }, ...notFound('merchant or account'), 422: { description: 'The account is not the merchant’s' } },
  },
  patchApiKey: {
    method: 'PATCH',
    path: '/api-keys/:client_id',
    operationId: 'adminPatchApiKey',
    tag,
    summary: 'Change a key’s permissions, whitelist or expiry',
    ...clientParams,
    body: S.patchApiKey,
    responses: { 200: { description: 'The key', schema: ApiKey }, ...notFound('API key') },
  },
  revokeApiKey: {
    method: 'POST',
    path: '/api-keys/:client_id/revoke',
    operationId: 'adminRevokeApiKey',
    tag,
    summary: 'Revoke a key',
    ...clientParams,
    responses: { 200: { description: 'Revoked', schema: z.object({ client_id: z.string(), active: z.boolean() }) }, ...notFound('API key') },
  },
  createPixKey: {
    method: 'POST',
    path: '/pix-keys',
    operationId: 'adminCreatePixKey',
    tag,
    summary: 'Register a PIX key of an account in the directory (an EVP is generated when `key` is absent)',
    body: S.createPixKey,
    bodyExample: { account_id: 2, type: 'email', key: 'loja@example.com' },
    responses: {
      201: { description: 'Registered', schema: z.object({ account_id: int, type: z.enum(PIX_KEY_TYPES), key: z.string() }) },
      ...notFound('account'),
      409: { description: 'The key is registered already' },
      422: { description: 'Invalid key for its type' },
    },
  },
  createCentralKey: {
    method: 'POST',
    path: '/central-keys',
    operationId: 'adminCreateCentralKey',
    tag,
    summary: 'Create a boleto central API key (shown once)',
    body: S.createCentralKey,
    bodyExample: { name: 'Billing', account_id: 2 },
    responses: {
      201: { description: 'Created', schema: z.object({ api_key: z.string(), name: z.string(), account_id: int.nullable() }) },
      ...notFound('account'),
    },
  },
});
