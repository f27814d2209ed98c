import { z } from 'zod';
import { named } from '../../http/apiSchemas.js';
import type { PixProblems } from '../../http/apiPixProblems.js';
import type { RouteSpec } from '../../http/routeSpec.js';
import type { Scope } from '../../apiPix/scopes.js';

/**
 * A route of the API Pix façade: a RouteSpec (mounted with `mount`, documented by the façade's
 * OpenAPI document) answering its errors as the standard's problems (`errorShape: 'api_pix'`),
 * needing `scope` of the caller's token (src/api/apiPix/bearer.ts) and naming its refusals
 * (`problems`: `CobOperacaoInvalida`, `CobNaoEncontrado`…). Paths are relative to /api/pix/v2.
 */
export interface PixRouteSpec extends Omit<RouteSpec, 'permission' | 'signed' | 'errorShape' | 'tag'> {
  scope: Scope;
  problems: PixProblems;
  tag: string;
}

export function pixRoute(spec: PixRouteSpec): RouteSpec & { scope: Scope; problems: PixProblems } {
  return { ...spec, errorShape: 'api_pix', config: { ...spec.config, scope: spec.scope, pixProblems: spec.problems } };
}

/** The façade's error body (RFC 7807, the standard's `Problema`), as /openapi.json names it. */
export const ApiPixProblem = named(
  'ApiPixProblem',
  z.looseObject({
    type: z.string(),
    title: z.string(),
    status: z.number().int(),
    detail: z.string().optional(),
    violacoes: z.array(z.looseObject({ razao: z.string(), propriedade: z.string(), valor: z.string().optional() })).optional(),
  }),
  'RFC 7807 problem with the standard’s type URI (https://pix.bcb.gov.br/api/v2/error/<Tipo>); `violacoes` for a malformed request',
);
