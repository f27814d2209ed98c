import type { TLSSocket } from 'node:tls';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { authenticateBearer, type PixCaller } from '../../apiPix/tokens.js';
import type { Scope } from '../../apiPix/scopes.js';
import type { AppContext } from '../../context.js';
import { pixAccessDenied, pixUnauthorized } from '../../http/apiPixProblems.js';
import { resolveClientIp } from '../../http/clientIp.js';
import { createHash } from 'node:crypto';

/**
 * The façade's request pipeline (every path under /api/pix/v2): a bearer token granted by
 * POST /api/pix/oauth/token (401 without one or with one that is unknown, expired, or whose key
 * was revoked), the key's IP whitelist and account (403 AcessoNegado), and the route's scope
 * (`config.scope`, 403 AcessoNegado without it). An unknown path is authenticated first, then 404.
 */
const callers = new WeakMap<FastifyRequest, PixCaller>();

/** The caller of a façade request (set by the pipeline before any handler runs). */
export function pixCaller(req: FastifyRequest): PixCaller {
  const caller = callers.get(req);
  if (!caller) throw new Error('pixCaller read outside the API Pix pipeline');
  return caller;
}

/** SHA-256 (hex) of the TLS client certificate of the request's connection, if one was presented. */
export function clientCertSha256(req: FastifyRequest): string | null {
  const socket = req.raw.socket as Partial<TLSSocket>;
  if (typeof socket.getPeerCertificate !== 'function') return null;
  const cert = socket.getPeerCertificate();
  return cert && cert.raw ? createHash('sha256').update(cert.raw).digest('hex') : null;
}

export function clientIpOf(req: FastifyRequest, ctx: AppContext): string {
  return resolveClientIp(req.socket.remoteAddress ?? '', req.headers['x-forwarded-for'], ctx.config.trustedProxies);
}

const BEARER = /^\s*Bearer\s+(\S+)\s*$/i;

export function installBearerPipeline(app: FastifyInstance, ctx: AppContext): void {
  app.addHook('onRequest', async (req) => {
    const header = req.headers.authorization;
    const match = typeof header === 'string' ? BEARER.exec(header) : null;
    if (!match) throw pixUnauthorized('Envie Authorization: Bearer <access_token> obtido em POST /api/pix/oauth/token', false);
    const result = await authenticateBearer(ctx, (clientId) => ctx.credentials.apiKey(ctx.db, clientId), {
      token: match[1]!,
      clientIp: clientIpOf(req, ctx),
      certSha256: clientCertSha256(req),
    });
    if ('refused' in result) {
      switch (result.refused) {
        case 'address_not_allowed':
          throw pixAccessDenied('O endereço da requisição não está na lista de IPs permitidos da chave de API');
        case 'account_inactive':
          throw pixAccessDenied('A conta ou o cliente da chave de API não está ativo');
        default:
          throw pixUnauthorized('O access_token é inválido, expirou ou a chave de API que o obteve foi revogada', true);
      }
    }
    callers.set(req, result.caller);
    if (req.is404) return;
    const scope = (req.routeOptions.config as { scope?: Scope } | undefined)?.scope;
    if (scope !== undefined && !result.caller.scopes.includes(scope)) {
      throw pixAccessDenied(`O access_token não tem o escopo ${scope} exigido por esta operação`);
    }
  });
}
