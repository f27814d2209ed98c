import type { z } from 'zod';
import { accountApi } from '../external/account.api.js';
import { BusinessError, PermissionError, PipelineError, WorkedFalseError } from '../http/apiSchemas.js';
import type { RouteSpec } from '../http/routeSpec.js';

/** The errors any route of an API can answer besides its own (status → description and shapes). */
export type CommonErrors = Record<number, { description: string; schemas: z.ZodType[] }>;

export interface ApiGroup {
  prefix: string;
  tags: Array<{ name: string; description: string }>;
  routes: RouteSpec[];
  headers(route: RouteSpec): Array<{ name: string; required: boolean; description: string; schema: Record<string, unknown> }>;
  security(route: RouteSpec): Array<Record<string, string[]>>;
  commonErrors(route: RouteSpec): CommonErrors;
}

const routesOf = (...apis: Array<Record<string, RouteSpec>>): RouteSpec[] => apis.flatMap((api) => Object.values(api));

const ANY_EXTERNAL = [PipelineError, PermissionError, WorkedFalseError, BusinessError];

export const external: ApiGroup = {
  prefix: '/api/external',
  tags: [{ name: 'Account', description: 'Balance and CPF validation' }],
  routes: routesOf(accountApi),
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
    };
    if (route.config?.rateLimit !== false) e[429] = { description: 'Rate limit reached (Retry-After: 60)', schemas: [PipelineError] };
    if (route.method !== 'GET' && route.method !== 'DELETE') {
      e[400] = { description: 'Malformed request, body required for the signature, bad v2 headers, Idempotency-Key too long', schemas: ANY_EXTERNAL };
      e[409] = { description: 'Idempotency-Key reused with another body or still in progress; v2 nonce reused', schemas: [PipelineError, WorkedFalseError] };
      e[413] = { description: 'Body larger than 1 MiB', schemas: [BusinessError] };
      e[415] = { description: 'Content-Type is not application/json', schemas: [PipelineError] };
      e[503] = { description: 'v2 replay protection unavailable (Retry-After: 5)', schemas: [WorkedFalseError] };
    } else {
      e[400] = { description: 'Malformed parameters', schemas: [BusinessError] };
    }
    return e;
  },
};

export const API_GROUPS: readonly ApiGroup[] = [external];
