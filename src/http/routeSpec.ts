import type { FastifyInstance, RouteHandlerMethod } from 'fastify';
import type { z } from 'zod';
import type { Permission } from '../auth/permissions.js';
import type { ErrorShape } from './errorMap.js';

/**
 * The route registry: one declaration per route — method, path, the zod schemas of its request
 * (params, query, body) and of its answers, the permission it needs and the statuses it gives —
 * that the route handler mounts and validates with, and that src/openapi/document.ts turns into the
 * OpenAPI document. Each domain keeps its declarations in one `*.api.ts` module.
 */
export type Method = 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';

export interface ResponseSpec {
  description: string;
  /** The body's schema; absent for an empty answer (204). */
  schema?: z.ZodType;
  /** The answer's media type when it is not JSON (`text/plain`, `text/event-stream`); default application/json. */
  contentType?: string;
  /**
   * `text/event-stream` only: the schema of each event's `data` (JSON). The document states it as
   * `x-itemSchema` of the media type (OpenAPI 3.2's `itemSchema`, as an extension in 3.1): an object
   * of the event's `id`, `event` and `data`, `data` being JSON text whose `contentSchema` is this.
   */
  eventData?: z.ZodType;
  /** Response headers worth documenting (name → description). */
  headers?: Record<string, string>;
  example?: unknown;
}

export interface RouteSpec {
  method: Method;
  /** Fastify path relative to the API's prefix (`/transactions/:id`). */
  path: string;
  operationId: string;
  summary: string;
  description?: string;
  tag: string;
  /** External API only: the permission the route requires (null: any authenticated key). */
  permission?: Permission | null;
  /** External API only: the request is signed (HMAC v1 or v2) and may carry an Idempotency-Key. */
  signed?: boolean;
  params?: z.ZodType;
  query?: z.ZodType;
  body?: z.ZodType;
  /** false when the body may be omitted (defaults to true when `body` is set). */
  bodyRequired?: boolean;
  bodyExample?: unknown;
  /** Request headers of this route beyond the API's own (the API group adds those). */
  requestHeaders?: Array<{ name: string; required: boolean; description: string; schema: Record<string, unknown> }>;
  /** The answers of this route (success and route-specific errors); the API's common errors are added by the document. */
  responses: Record<number, ResponseSpec>;
  /** The shape a DomainError thrown under this route is answered in (src/http/errorMap.ts); default `business`. */
  errorShape?: ErrorShape;
  /** Extra Fastify route config (rate-limit exemption, boleto endpoint name). */
  config?: Record<string, unknown>;
}

/** Declares a domain's routes (keeps the literal keys for `api.name` access). */
export function defineRoutes<T extends Record<string, RouteSpec>>(routes: T): T {
  return routes;
}

/** Mounts a declared route on a Fastify scope with its handler. */
export function mount(app: FastifyInstance, spec: RouteSpec, handler: RouteHandlerMethod): void {
  app.route({
    method: spec.method,
    url: spec.path,
    config: {
      ...(spec.permission !== undefined ? { permission: spec.permission } : {}),
      ...(spec.errorShape !== undefined ? { errorShape: spec.errorShape } : {}),
      ...spec.config,
    },
    handler,
  });
}
