import type { FastifyInstance, FastifyReply } from 'fastify';
import { authenticate } from '../../auth/credentials.js';
import { decideScopes } from '../../apiPix/scopes.js';
import { certificateRefusal, grantToken, keyRefusal } from '../../apiPix/tokens.js';
import type { AppContext } from '../../context.js';
import { toHttpError } from '../../http/errorHandler.js';
import { clientCertSha256, clientIpOf } from './bearer.js';

/**
 * POST /api/pix/oauth/token: OAuth2 client credentials (RFC 6749 §4.4) for the API Pix façade. The
 * client is a pixgate API key: `Authorization: Basic base64(client_id:client_secret)`; the body is
 * form-encoded (`grant_type=client_credentials`, optional `scope` space-separated), JSON accepted
 * too. Errors are RFC 6749 §5.2 bodies `{error, error_description}`:
 *   400 invalid_request           no or a malformed grant_type, a body that is not a form
 *   400 unsupported_grant_type    grant_type other than client_credentials
 *   400 invalid_scope             an unknown scope, one beyond the key's permissions, or none grantable
 *   401 invalid_client            no Basic credentials, a wrong secret, a key revoked, disabled or expired;
 *                                 a TLS client certificate other than the one bound to the key, or none
 *                                 where mutual TLS is required (TLS configured outside local mode)
 *   403 access_denied             the request's address is not in the key's IP whitelist; its account is inactive
 */
const FORM = 'application/x-www-form-urlencoded';
const MAX_FORM_BYTES = 4096;

function oauthError(reply: FastifyReply, status: number, error: string, description: string) {
  void reply.code(status).header('cache-control', 'no-store').header('pragma', 'no-cache');
  if (status === 401) void reply.header('www-authenticate', 'Basic realm="api-pix"');
  return reply.send({ error, error_description: description });
}

export async function oauthRoutes(app: FastifyInstance, ctx: AppContext) {
  // A body the parsers refuse (bad JSON, too large, another media type) is an OAuth error too;
  // a fault past the request (the database down) keeps pixgate's answer (503, 500).
  app.setErrorHandler((err, req, reply) => {
    const answer = toHttpError(err, req);
    if (answer.statusCode >= 500) return reply.code(answer.statusCode).headers(answer.headers).send(answer.body);
    return oauthError(reply, 400, 'invalid_request', 'O corpo deve ser application/x-www-form-urlencoded (ou JSON) com grant_type');
  });
  app.addContentTypeParser(FORM, { parseAs: 'string', bodyLimit: MAX_FORM_BYTES }, (_req, body, done) => {
    const params = new URLSearchParams(body.toString());
    const fields: Record<string, string> = Object.create(null);
    for (const [k, v] of params) if (!(k in fields)) fields[k] = v;
    done(null, fields);
  });

  app.post('/oauth/token', { bodyLimit: MAX_FORM_BYTES }, async (req, reply) => {
    const body = (req.body ?? {}) as Record<string, unknown>;
    const auth = await authenticate((clientId) => ctx.credentials.apiKey(ctx.db, clientId), ctx.wallClock, req.headers.authorization);
    if (!('key' in auth)) {
      const why = auth.refused === 'missingCredentials' ? 'Envie Authorization: Basic base64(client_id:client_secret)' : auth.refused === 'invalidCredentials' ? 'client_id ou client_secret inválido' : 'A chave de API está revogada, desativada ou expirada';
      return oauthError(reply, 401, 'invalid_client', why);
    }
    const grantType = body.grant_type;
    if (typeof grantType !== 'string' || grantType === '') return oauthError(reply, 400, 'invalid_request', 'grant_type é obrigatório (client_credentials)');
    if (grantType !== 'client_credentials') return oauthError(reply, 400, 'unsupported_grant_type', 'Somente grant_type=client_credentials é aceito');
    const scope = body.scope;
    if (scope !== undefined && typeof scope !== 'string') return oauthError(reply, 400, 'invalid_request', 'scope deve ser um texto com escopos separados por espaço');
    const refusal = keyRefusal(auth.key, clientIpOf(req, ctx), ctx.wallClock.now());
    if (refusal === 'address_not_allowed') return oauthError(reply, 403, 'access_denied', 'O endereço da requisição não está na lista de IPs permitidos da chave de API');
    if (refusal === 'account_inactive') return oauthError(reply, 403, 'access_denied', 'A conta ou o cliente da chave de API não está ativo');
    if (refusal) return oauthError(reply, 401, 'invalid_client', 'A chave de API está revogada, desativada ou expirada');
    const cert = clientCertSha256(req);
    const certRefusal = certificateRefusal(auth.key, cert, ctx.config.tls !== undefined && ctx.config.appEnv !== 'local');
    if (certRefusal === 'certificate_mismatch') return oauthError(reply, 401, 'invalid_client', 'O certificado TLS do cliente não é o vinculado à chave de API');
    if (certRefusal === 'certificate_required') return oauthError(reply, 401, 'invalid_client', 'TLS mútuo: vincule um certificado de cliente à chave de API e apresente-o');
    const decision = decideScopes(scope, auth.key.permissions);
    if ('refused' in decision) {
      const why =
        decision.refused === 'unknown'
          ? `Escopo desconhecido: ${decision.scope.slice(0, 100)}`
          : decision.refused === 'beyond_permissions'
            ? `As permissões da chave de API não permitem o escopo ${decision.scope}`
            : 'As permissões da chave de API não permitem nenhum escopo da API Pix';
      return oauthError(reply, 400, 'invalid_scope', why);
    }
    const granted = await grantToken(ctx, auth.key, decision.granted, cert);
    return reply
      .code(200)
      .header('cache-control', 'no-store')
      .header('pragma', 'no-cache')
      .send({ access_token: granted.accessToken, token_type: 'Bearer', expires_in: granted.expiresIn, scope: granted.scopes.join(' ') });
  });
}
