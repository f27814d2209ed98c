import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { z } from 'zod';
import { BusinessError, namedSchemas, PermissionError, PipelineError, WorkedFalseError } from '../http/apiSchemas.js';
import type { ResponseSpec, RouteSpec } from '../http/routeSpec.js';
import { packageRoot } from '../lib/paths.js';
import { API_GROUPS, type ApiGroup } from './groups.js';
import { SCOPES, SCOPE_PERMISSION } from '../apiPix/scopes.js';

/**
 * Builds the OpenAPI 3.1 document from the route registry (src/http/routeSpec.ts): every route of
 * every API with the zod schemas its handler validates with (requests, as input) and answers with
 * (responses, as output), plus the errors every route of its API can give. Built once per process.
 */
type JsonSchema = Record<string, unknown>;
type Json = Record<string, unknown>;

const REF = (id: string) => `#/components/schemas/${id}`;

function clean(schema: JsonSchema): JsonSchema {
  const { $schema: _s, $id: _i, ...rest } = schema;
  return rest;
}

function toSchema(schema: z.ZodType, io: 'input' | 'output'): JsonSchema {
  return clean(z.toJSONSchema(schema, { target: 'draft-2020-12', io, unrepresentable: 'any' }) as JsonSchema);
}

/** `/transactions/:id` → `/transactions/{id}`. */
export function openApiPath(path: string): string {
  return path.replace(/:([A-Za-z0-9_]+)/g, '{$1}');
}

function upperFirst(s: string): string {
  return s.charAt(0).toUpperCase() + s.slice(1);
}

interface Built {
  doc: Json;
}

function buildSchemas(groups: readonly ApiGroup[]) {
  // Responses (output) share the named components; request bodies (input) get one component each.
  const out = z.registry<{ id: string; description?: string }>();
  const inp = z.registry<{ id: string; description?: string }>();
  const ids = new Map<z.ZodType, string>();
  const bodyIds = new Map<z.ZodType, string>();
  for (const [schema, meta] of registryEntries()) {
    out.add(schema, meta);
    ids.set(schema, meta.id);
  }
  for (const group of groups) {
    for (const route of group.routes) {
      for (const [status, response] of Object.entries(route.responses)) {
        if (response.schema && !ids.has(response.schema)) {
          const id = `${upperFirst(route.operationId)}${status}`;
          out.add(response.schema, { id });
          ids.set(response.schema, id);
        }
        if (response.eventData && !ids.has(response.eventData)) {
          const id = `${upperFirst(route.operationId)}${status}EventData`;
          out.add(response.eventData, { id });
          ids.set(response.eventData, id);
        }
      }
      if (route.body && !bodyIds.has(route.body)) {
        const id = `${upperFirst(route.operationId)}Request`;
        inp.add(route.body, { id });
        bodyIds.set(route.body, id);
      }
    }
  }
  const opts = { target: 'draft-2020-12' as const, unrepresentable: 'any' as const, uri: REF };
  const outSchemas = (z.toJSONSchema(out, { ...opts, io: 'output' }) as { schemas: Record<string, JsonSchema> }).schemas;
  const inSchemas = (z.toJSONSchema(inp, { ...opts, io: 'input' }) as { schemas: Record<string, JsonSchema> }).schemas;
  const all: Record<string, JsonSchema> = {};
  for (const [id, s] of Object.entries({ ...outSchemas, ...inSchemas })) all[id] = clean(s);
  return { all, ids, bodyIds };
}

function registryEntries() {
  return namedSchemas;
}

function parameters(route: RouteSpec, group: ApiGroup): Json[] {
  const params: Json[] = [];
  const pathNames = [...route.path.matchAll(/:([A-Za-z0-9_]+)/g)].map((m) => m[1]!);
  const pathSchema = route.params ? (toSchema(route.params, 'input') as { properties?: Record<string, JsonSchema> }) : {};
  for (const name of pathNames) {
    params.push({ name, in: 'path', required: true, schema: pathSchema.properties?.[name] ?? { type: 'string', minLength: 1 } });
  }
  if (route.query) {
    const q = toSchema(route.query, 'input') as { properties?: Record<string, JsonSchema>; required?: string[] };
    for (const [name, schema] of Object.entries(q.properties ?? {})) {
      const { description, ...rest } = schema as { description?: string };
      params.push({ name, in: 'query', required: (q.required ?? []).includes(name), schema: rest, ...(description ? { description } : {}) });
    }
  }
  for (const h of [...group.headers(route), ...(route.requestHeaders ?? [])]) params.push({ in: 'header', ...h });
  return params;
}

function responseObject(
  status: number,
  spec: ResponseSpec | undefined,
  common: { description: string; schemas: z.ZodType[] } | undefined,
  group: ApiGroup,
  ids: Map<z.ZodType, string>,
): Json {
  const headers = spec?.headers ?? (status === 429 ? { 'Retry-After': 'Seconds to wait before retrying' } : undefined);
  const base = {
    description: spec?.description ?? common?.description ?? `HTTP ${status}`,
    ...(headers ? { headers: Object.fromEntries(Object.entries(headers).map(([name, description]) => [name, { description, schema: { type: 'string' } }])) } : {}),
  };
  if (spec?.contentType && spec.contentType !== 'application/json') {
    // A text answer: its media type, a string schema, and for an event stream the schema of each event.
    const media: Json = { schema: spec.schema ? toSchema(spec.schema, 'output') : { type: 'string' } };
    if (spec.eventData) {
      media['x-itemSchema'] = {
        type: 'object',
        description: 'One event of the stream (its `id:`, `event:` and `data:` lines); the first message carries only `id:` (the starting cursor); comment lines (`:`) are heartbeats',
        properties: {
          id: { type: 'string', pattern: '^\\d+$' },
          event: { type: 'string' },
          data: { type: 'string', contentMediaType: 'application/json', contentSchema: { $ref: REF(ids.get(spec.eventData)!) } },
          retry: { type: 'integer', minimum: 0 },
        },
        required: ['id', 'event', 'data'],
      };
    }
    return { ...base, content: { [spec.contentType]: media } };
  }
  const refs: string[] = [];
  if (spec?.schema) refs.push(ids.get(spec.schema)!);
  if (status >= 400) {
    for (const s of common?.schemas ?? []) refs.push(ids.get(s)!);
    if (spec && group.defaultError) refs.push(ids.get(group.defaultError)!);
  }
  const unique = [...new Set(refs)];
  const schema = unique.length === 1 ? { $ref: REF(unique[0]!) } : { anyOf: unique.map((id) => ({ $ref: REF(id) })) };
  const mediaType = status >= 400 && group.errorContentType ? group.errorContentType : 'application/json';
  return {
    ...base,
    ...(unique.length ? { content: { [mediaType]: { schema, ...(spec?.example !== undefined ? { example: spec.example } : {}) } } } : {}),
  };
}

/**
 * Answers of Node's HTTP parser, before any route or API is known (src/http/errorHandler.ts
 * `clientErrorHandler`), so any operation can give them: in the business shape, `Connection: close`.
 */
const TRANSPORT_ERRORS: Record<number, { description: string; schemas: z.ZodType[] }> = {
  431: { description: 'Request line and headers larger than 16 KiB (e.g. a very long URL), refused before routing', schemas: [BusinessError] },
};

function build(): Built {
  const groups = API_GROUPS;
  const { all, ids, bodyIds } = buildSchemas(groups);
  const paths: Record<string, Record<string, Json>> = {};
  for (const group of groups) {
    for (const route of group.routes) {
      const path = openApiPath(group.prefix + route.path);
      const common = { ...group.commonErrors(route), ...TRANSPORT_ERRORS };
      const statuses = new Set([...Object.keys(route.responses).map(Number), ...Object.keys(common).map(Number)]);
      const responses: Record<string, Json> = {};
      for (const status of [...statuses].sort((a, b) => a - b)) responses[String(status)] = responseObject(status, route.responses[status], common[status], group, ids);
      const op: Json = {
        operationId: route.operationId,
        summary: route.summary,
        ...(route.description || route.permission !== undefined
          ? { description: [route.description, route.permission ? `Permission: \`${route.permission}\`.` : route.permission === null ? 'Any authenticated key.' : undefined].filter(Boolean).join('\n\n') }
          : {}),
        tags: [route.tag],
        ...(route.permission !== undefined ? { 'x-permission': route.permission } : {}),
        parameters: parameters(route, group),
        ...(route.body
          ? {
              requestBody: {
                required: route.bodyRequired ?? true,
                content: { 'application/json': { schema: { $ref: REF(bodyIds.get(route.body)!) }, ...(route.bodyExample !== undefined ? { example: route.bodyExample } : {}) } },
              },
            }
          : {}),
        responses,
        security: group.security(route),
      };
      if ((op.parameters as Json[]).length === 0) delete op.parameters;
      (paths[path] ??= {})[route.method.toLowerCase()] = op;
    }
  }
  const version = (JSON.parse(readFileSync(join(packageRoot, 'package.json'), 'utf8')) as { version: string }).version;
  return {
    doc: {
      openapi: '3.1.0',
      info: {
        title: 'pixgate',
        version,
        summary: 'PIX payment accounts: merchant API, boleto central API, operator API and rail sandbox',
        description: DESCRIPTION,
        license: { name: 'Apache-2.0', identifier: 'Apache-2.0' },
      },
      servers: [{ url: '/' }],
      tags: groups.flatMap((g) => g.tags),
      paths,
      components: {
        schemas: all,
        securitySchemes: SECURITY_SCHEMES,
      },
    },
  };
}

const DESCRIPTION = [
  'Money goes in as integer **cents** and comes back in **base units** (1 cent = 100 base units) in every answer of the merchant API.',
  '',
  'Merchant API (`/api/external`): `Authorization: ApiKey <client_id>:<client_secret>` (or HTTP Basic with the same pair), from an IP of the key’s whitelist. ',
  'POST requests are signed: `hmac` is the hex HMAC-SHA512 of the canonical JSON body with the client secret (version 1), or, with `X-Signature-Version: 2`, of ',
  '`v2\\n<X-Request-Timestamp>\\n<X-Request-Nonce>\\n<METHOD>\\n<path>\\n<Idempotency-Key>\\n<canonical body>` (docs/signing.md). ',
  '`Idempotency-Key` makes a POST safe to retry: the stored answer is replayed with `X-Idempotent-Replay: true`. `X-Key-Case: camelCase` switches request and answer keys to camelCase.',
  '',
  'API Pix (`/api/pix/v2`, the central bank’s standard v2.9.0, docs/api-pix.md): OAuth2 client credentials at `/api/pix/oauth/token`, then `Authorization: Bearer`; errors are RFC 7807 problems.',
  '',
  'Boleto central API (`/api/v1/central`): `X-API-Key`. Operator (`/api/admin`) and sandbox (`/api/sandbox`, off in production): `Authorization: Bearer <ADMIN_TOKEN>`.',
].join('\n');

const SECURITY_SCHEMES = {
  ApiKeyAuth: {
    type: 'apiKey',
    in: 'header',
    name: 'Authorization',
    description: '`ApiKey <client_id>:<client_secret>`',
  },
  BasicAuth: { type: 'http', scheme: 'basic', description: 'HTTP Basic with client_id as user and client_secret as password' },
  HmacSignature: {
    type: 'apiKey',
    in: 'header',
    name: 'hmac',
    description:
      'Hex HMAC-SHA512 (key: client_secret) of the canonical JSON body (v1), or of the v2 signing string when `X-Signature-Version: 2` is sent with `X-Request-Timestamp`, `X-Request-Nonce` and `Idempotency-Key` (docs/signing.md)',
  },
  CentralApiKey: { type: 'apiKey', in: 'header', name: 'X-API-Key', description: 'A boleto central API key (created with POST /api/admin/central-keys)' },
  AdminBearer: { type: 'http', scheme: 'bearer', description: 'The operator’s ADMIN_TOKEN' },
  ApiPixOAuth2: {
    type: 'oauth2',
    description: 'The API Pix façade: OAuth2 client credentials over a pixgate API key (docs/api-pix.md); calls carry `Authorization: Bearer <access_token>`',
    flows: { clientCredentials: { tokenUrl: '/api/pix/oauth/token', scopes: Object.fromEntries(SCOPES.map((s) => [s, `needs the key permission ${SCOPE_PERMISSION[s]}`])) } },
  },
} as const;

export { BusinessError, PermissionError, PipelineError, WorkedFalseError };

let cached: { json: string; doc: Json } | undefined;

/** The document (built once per process). */
export function openApiDocument(): Json {
  cached ??= (() => {
    const { doc } = build();
    return { doc, json: JSON.stringify(doc) };
  })();
  return cached.doc;
}

/** The document serialized, as /openapi.json serves it. */
export function openApiJson(): string {
  openApiDocument();
  return cached!.json;
}
