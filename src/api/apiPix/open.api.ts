import { z } from 'zod';
import { defineRoutes } from '../../http/routeSpec.js';
import { ApiPixProblem } from './spec.js';

/**
 * The façade's routes outside /api/pix/v2, for the OpenAPI document: the token endpoint (OAuth2
 * client credentials), the key set of the payload signatures, and the payload read at a location.
 * Mounted by oauth.routes.ts and payload.routes.ts.
 */
const OAuthError = z.object({
  error: z.enum(['invalid_request', 'unsupported_grant_type', 'invalid_scope', 'invalid_client', 'access_denied']),
  error_description: z.string(),
});

export const apiPixOpenApi = defineRoutes({
  token: {
    method: 'POST',
    path: '/api/pix/oauth/token',
    operationId: 'apiPixToken',
    summary: 'Obtém um access_token (OAuth2 client credentials)',
    description:
      'HTTP Basic with the API key’s `client_id:client_secret`. The body is `application/x-www-form-urlencoded` (`grant_type=client_credentials&scope=…`); the same fields as JSON are accepted too. Without `scope`, every scope the key’s permissions allow (docs/api-pix.md, "Scopes").',
    tag: 'API Pix: OAuth2',
    body: z.object({ grant_type: z.string(), scope: z.string().optional() }),
    bodyRequired: false,
    responses: {
      200: { description: 'The token', schema: z.object({ access_token: z.string(), token_type: z.literal('Bearer'), expires_in: z.number().int(), scope: z.string() }) },
      400: { description: 'invalid_request, unsupported_grant_type, invalid_scope', schema: OAuthError },
      401: { description: 'invalid_client: no Basic credentials, a wrong secret, a revoked/disabled/expired key', schema: OAuthError },
      403: { description: 'access_denied: the address is not in the key’s whitelist, or its account is inactive', schema: OAuthError },
    },
  },
  jwks: {
    method: 'GET',
    path: '/api/pix/jwks.json',
    operationId: 'apiPixJwks',
    summary: 'Chaves que verificam os payloads JWS das locations',
    tag: 'API Pix: payload',
    responses: { 200: { description: 'JWK Set (RFC 7517)', schema: z.object({ keys: z.array(z.looseObject({ kty: z.string(), kid: z.string() })) }) } },
  },
  payload: {
    method: 'GET',
    path: '/qr/v2/:pixUrlAccessToken',
    operationId: 'apiPixPayload',
    summary: 'O payload da cobrança de uma location (JWS)',
    description: 'Unauthenticated, as the standard’s `GET /{pixUrlAccessToken}`: a compact JWS (RS256) whose payload is the charge as the payer’s bank reads it.',
    tag: 'API Pix: payload',
    params: z.object({ pixUrlAccessToken: z.string() }),
    responses: {
      200: { description: 'The JWS', contentType: 'application/jose' },
      404: { description: 'CobPayloadNaoEncontrado: no ATIVA charge at this location', schema: ApiPixProblem, contentType: 'application/problem+json' },
      503: { description: 'Serviço indisponível', schema: ApiPixProblem, contentType: 'application/problem+json' },
    },
  },
  cobvPayload: {
    method: 'GET',
    path: '/qr/v2/cobv/:pixUrlAccessToken',
    operationId: 'apiPixCobvPayload',
    summary: 'O payload da cobrança com vencimento de uma location (JWS), com o valor devido em DPP',
    description: 'Unauthenticated, as the standard’s `GET /cobv/{pixUrlAccessToken}`: a compact JWS (RS256) of the due-date charge with `valor.final` the amount due on `DPP` (default today, Brasília). `codMun` is read, not used.',
    tag: 'API Pix: payload',
    params: z.object({ pixUrlAccessToken: z.string() }),
    query: z.object({ codMun: z.string().regex(/^\d{7}$/).optional(), DPP: z.string().optional() }),
    responses: {
      200: { description: 'The JWS', contentType: 'application/jose' },
      400: { description: 'CobPayloadOperacaoInvalida: codMun or DPP malformed, DPP before today or after the last payable day', schema: ApiPixProblem, contentType: 'application/problem+json' },
      404: { description: 'CobPayloadNaoEncontrado: no ATIVA cobv at this location', schema: ApiPixProblem, contentType: 'application/problem+json' },
      503: { description: 'Serviço indisponível', schema: ApiPixProblem, contentType: 'application/problem+json' },
    },
  },
});
