import type { z } from 'zod';
import { adminApi } from '../admin/admin.api.js';
import { boletoApi, BoletoErrorBody } from '../api/boleto/boleto.api.js';
import { accountApi } from '../external/account.api.js';
import { healthApi } from '../health.js';
import { medApi } from '../api/med/med.api.js';
import { pixApi } from '../api/pix/pix.api.js';
import { sandboxApi } from '../sandbox/sandbox.api.js';
import { clockApi } from '../sandbox/clock.api.js';
import { transactionsApi } from '../api/transactions/transactions.api.js';
import { webhooksAdminApi, webhooksApi } from '../api/webhooks/webhooks.api.js';
import { feedApi, metricsApi, railApi, tefAdminApi, tefApi } from './more.api.js';
import { BusinessError, PermissionError, PipelineError, WorkedFalseError } from '../http/apiSchemas.js';
import type { RouteSpec } from '../http/routeSpec.js';
import { cobApi } from '../api/apiPix/cob.api.js';
import { cobvApi } from '../api/apiPix/cobv.api.js';
import { loteApi } from '../api/apiPix/lotecobv.api.js';
import { locApi } from '../api/apiPix/loc.api.js';
import { pixApi as apiPixPixApi } from '../api/apiPix/pix.routes.js';
import { apiPixOpenApi } from '../api/apiPix/open.api.js';
import { ApiPixProblem } from '../api/apiPix/spec.js';

/** The errors any route of an API can answer besides its own (status → description and shapes). */
export type CommonErrors = Record<number, { description: string; schemas: z.ZodType[] }>;

export interface ApiGroup {
  prefix: string;
  tags: Array<{ name: string; description: string }>;
  routes: RouteSpec[];
  headers(route: RouteSpec): Array<{ name: string; required: boolean; description: string; schema: Record<string, unknown> }>;
  security(route: RouteSpec): Array<Record<string, string[]>>;
  commonErrors(route: RouteSpec): CommonErrors;
  /** The body of any error status a route declares: added beside the route's own schema. */
  defaultError?: z.ZodType;
  /** The media type of the group's common errors (default application/json). */
  errorContentType?: string;
}

const routesOf = (...apis: Array<Record<string, RouteSpec>>): RouteSpec[] => apis.flatMap((api) => Object.values(api));

/** Any operation that reads or writes the database may answer this (src/http/errors.ts `serviceUnavailable`). */
const DATABASE_UNAVAILABLE = 'The database does not answer: `service_unavailable`, retry after the Retry-After seconds';

const ANY_EXTERNAL = [PipelineError, PermissionError, WorkedFalseError, BusinessError];

export const external: ApiGroup = {
  prefix: '/api/external',
  defaultError: BusinessError,
  tags: [
    { name: 'Account', description: 'Balance and CPF validation' },
    { name: 'PIX', description: 'Sending (cash-out), returning (refund) and receiving (charges) PIX; the account’s keys' },
    { name: 'TEF', description: 'Transfers between accounts of this institution' },
    { name: 'Transactions', description: 'Statement, transaction list, lookups and receipts' },
    { name: 'MED', description: 'Disputes of PIX received (Mecanismo Especial de Devolução)' },
    { name: 'Webhooks', description: 'Registrations and the event catalog' },
  ],
  routes: routesOf(accountApi, pixApi, tefApi, transactionsApi, medApi, webhooksApi, feedApi),
  headers(route) {
    // X-Key-Case is described in the document's introduction, not as a parameter: the schemas
    // here are the snake_case form, and a camelCase exchange is the same document with keys renamed.
    const h: ReturnType<ApiGroup['headers']> = [];
    if (route.signed) {
      h.push(
        { name: 'X-Signature-Version', required: false, description: '`2` selects signature version 2 (then X-Request-Timestamp, X-Request-Nonce and Idempotency-Key are required)', schema: { type: 'string', enum: ['2'] } },
        { name: 'X-Request-Timestamp', required: false, description: 'v2: Unix time in seconds, within 300 s of the server’s clock', schema: { type: 'string', pattern: '^\\d{1,12}$' } },
        { name: 'X-Request-Nonce', required: false, description: 'v2: single-use nonce', schema: { type: 'string', pattern: '^[A-Za-z0-9._~-]{16,128}$' } },
        { name: 'Idempotency-Key', required: false, description: 'Makes the POST safe to retry: the first answer is stored and replayed (8 to 256 characters with v2)', schema: { type: 'string', minLength: 1, maxLength: 256 } },
      );
    }
    return h;
  },
  security(route): Array<Record<string, string[]>> {
    return route.signed
      ? [
          { ApiKeyAuth: [], HmacSignature: [] },
          { BasicAuth: [], HmacSignature: [] },
        ]
      : [{ ApiKeyAuth: [] }, { BasicAuth: [] }];
  },
  commonErrors(route) {
    const e: CommonErrors = {
      401: { description: 'Missing, invalid, inactive or expired API key; missing or invalid signature', schemas: [PipelineError, WorkedFalseError] },
      403: { description: 'IP not in the key’s whitelist, inactive account, permission missing, HMAC not configured', schemas: [PipelineError, PermissionError, WorkedFalseError] },
      500: { description: 'Internal error (the body names the request id)', schemas: [BusinessError] },
      503: { description: DATABASE_UNAVAILABLE, schemas: [BusinessError] },
    };
    if (route.config?.rateLimit !== false) e[429] = { description: 'Rate limit reached (Retry-After: 60)', schemas: [PipelineError] };
    if (route.method !== 'GET' && route.method !== 'DELETE') {
      e[400] = { description: 'Malformed request, body required for the signature, bad v2 headers, Idempotency-Key too long', schemas: ANY_EXTERNAL };
      e[409] = { description: 'Idempotency-Key reused with another body or still in progress; v2 nonce reused', schemas: [PipelineError, WorkedFalseError] };
      e[503] = { description: `${DATABASE_UNAVAILABLE}; v2 replay protection unavailable (Retry-After: 5)`, schemas: [BusinessError, WorkedFalseError] };
    } else {
      e[400] = { description: 'Malformed parameters', schemas: [BusinessError] };
    }
    // Any request but a GET may carry a body, so any of them may be refused for its size or type.
    if (route.method !== 'GET') {
      e[413] = { description: 'Body larger than 1 MiB', schemas: [BusinessError] };
      // The pipeline's Content-Type stage (shape 1) judges a request with a body; the body parser
      // refuses, in the business shape, a Content-Type it cannot parse on a request without one
      // (a POST with Content-Length: 0, any DELETE).
      e[415] = { description: 'Content-Type is not application/json', schemas: route.method === 'DELETE' ? [BusinessError] : [PipelineError, BusinessError] };
    }
    return e;
  },
};

const bearer = (): Array<Record<string, string[]>> => [{ AdminBearer: [] }];
const noHeaders = () => [];

/** Errors of the operator and sandbox APIs: the business shape, and the failed-token limiter. */
function operatorErrors(route: RouteSpec): CommonErrors {
  const e: CommonErrors = {
    400: { description: 'Malformed request (field map)', schemas: [BusinessError] },
    401: { description: 'Missing or invalid admin token', schemas: [BusinessError] },
    429: { description: 'Too many failed admin authentications from this address (Retry-After)', schemas: [BusinessError] },
    500: { description: 'Internal error', schemas: [BusinessError] },
    503: { description: DATABASE_UNAVAILABLE, schemas: [BusinessError] },
  };
  // Any request but a GET may carry a body (a route without one included), refused for its size or type.
  if (route.method !== 'GET') {
    e[413] = { description: 'Body larger than 1 MiB', schemas: [BusinessError] };
    e[415] = { description: 'Content-Type is not application/json', schemas: [BusinessError] };
  }
  return e;
}

export const admin: ApiGroup = {
  prefix: '/api/admin',
  defaultError: BusinessError,
  tags: [
    { name: 'Operator', description: 'Merchants, accounts, deposits, API keys, PIX keys and central keys (ADMIN_TOKEN)' },
    { name: 'Operator: webhooks', description: 'Every merchant’s webhooks and their deliveries' },
  ],
  routes: routesOf(adminApi, tefAdminApi, webhooksAdminApi),
  headers: noHeaders,
  security: bearer,
  commonErrors: operatorErrors,
};

export const sandbox: ApiGroup = {
  prefix: '/api/sandbox',
  defaultError: BusinessError,
  tags: [{ name: 'Sandbox', description: 'The rail simulator’s controls (not served when APP_ENV=production)' }],
  routes: routesOf(sandboxApi, railApi, clockApi),
  headers: noHeaders,
  security: bearer,
  commonErrors: operatorErrors,
};

export const central: ApiGroup = {
  prefix: '/api/v1/central',
  defaultError: BoletoErrorBody,
  tags: [{ name: 'Boleto central', description: 'Boletos and their settlements (X-API-Key)' }],
  routes: routesOf(boletoApi),
  headers: noHeaders,
  security: () => [{ CentralApiKey: [] }],
  commonErrors(route) {
    const all = (description: string) => ({ description, schemas: [BoletoErrorBody] });
    const e: CommonErrors = {
      400: all('VALIDATION_ERROR (details.fields) or INVALID_JSON'),
      401: all('UNAUTHORIZED: missing or unknown X-API-Key'),
      429: all('RATE_LIMITED (Retry-After)'),
      500: all('INTERNAL_ERROR'),
      503: all('SERVICE_UNAVAILABLE: the database does not answer (Retry-After)'),
    };
    if (route.method !== 'GET') {
      e[413] = all('PAYLOAD_TOO_LARGE');
      e[415] = all('UNSUPPORTED_MEDIA_TYPE');
    }
    return e;
  },
};

export const root: ApiGroup = {
  prefix: '',
  tags: [{ name: 'Health', description: 'Liveness and readiness' }],
  routes: routesOf(healthApi, metricsApi),
  headers: noHeaders,
  security: (route) => (route.path === '/metrics' ? [{ AdminBearer: [] }] : []),
  // A URL that is not valid percent-encoding (or encodes U+0000) is refused on every route, these too.
  commonErrors: () => ({ 400: { description: 'Malformed URL: invalid percent-encoding or an encoded U+0000', schemas: [BusinessError] } }),
  defaultError: BusinessError,
};

/**
 * The API Pix façade (docs/api-pix.md): the standard's operations pixgate serves, in pixgate's own
 * words (the standard's own document is the central bank's; the tests check every answer against it).
 */
export const apiPix: ApiGroup = {
  prefix: '/api/pix/v2',
  errorContentType: 'application/problem+json',
  tags: [
    { name: 'API Pix: cob', description: 'Charges paid at once (the standard’s `cob`), each a pixgate charge underneath' },
    { name: 'API Pix: cobv', description: 'Due-date charges (the standard’s `cobv`), each a pixgate charge underneath whose amount depends on the payment date' },
    { name: 'API Pix: lotecobv', description: 'Batches of due-date charges (the standard’s `lotecobv`)' },
    { name: 'API Pix: loc', description: 'Payload locations (the standard’s `loc`)' },
    { name: 'API Pix: Pix', description: 'Pix received (pixgate’s inbound records) and their returns (`devolucao`, pixgate refunds)' },
    { name: 'API Pix: Webhook', description: 'The standard’s webhooks per PIX key, delivered to `{webhookUrl}/pix` by pixgate’s webhook engine' },
  ],
  routes: routesOf(cobApi, cobvApi, loteApi, locApi, apiPixPixApi),
  headers: () => [],
  security: (route) => [{ ApiPixOAuth2: [String((route.config as { scope?: string } | undefined)?.scope ?? '')] }],
  commonErrors: () => ({
    400: { description: 'A URL that is not valid percent-encoding', schemas: [ApiPixProblem] },
    401: { description: 'No bearer token, or one unknown, expired or of a revoked key (`type: about:blank`, WWW-Authenticate: Bearer)', schemas: [ApiPixProblem] },
    403: { description: 'AcessoNegado: the token lacks the scope; the address left the key’s whitelist', schemas: [ApiPixProblem] },
    500: { description: 'ErroInternoDoServidor', schemas: [ApiPixProblem] },
    503: { description: 'ServicoIndisponivel (Retry-After)', schemas: [ApiPixProblem] },
  }),
};

export const apiPixOpen: ApiGroup = {
  prefix: '',
  tags: [
    { name: 'API Pix: OAuth2', description: 'Access tokens of the API Pix façade over a pixgate API key' },
    { name: 'API Pix: payload', description: 'What a payer’s bank reads at a location' },
  ],
  routes: routesOf(apiPixOpenApi),
  headers: () => [],
  security: (route) => (route.path === '/api/pix/oauth/token' ? [{ BasicAuth: [] }] : []),
  // The token endpoint answers every refusal in OAuth2's body (its own 400); the reads may meet a malformed URL.
  commonErrors: (route): CommonErrors => (route.method === 'GET' ? { 400: { description: 'Malformed URL', schemas: [BusinessError] } } : {}),
};

export const API_GROUPS: readonly ApiGroup[] = [external, central, admin, sandbox, apiPix, apiPixOpen, root];
