import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { AppContext } from '../../context.js';
import { pixProblem } from '../../http/apiPixProblems.js';
import { malformedUrlMessage } from '../../http/errorHandler.js';
import { installBearerPipeline } from './bearer.js';
import { cobRoutes } from './cob.routes.js';
import { cobvRoutes } from './cobv.routes.js';
import { loteCobvRoutes } from './lotecobv.routes.js';
import { locRoutes } from './loc.routes.js';
import { oauthRoutes } from './oauth.routes.js';
import { pixRoutes } from './pix.routes.js';

/** The prefix of the façade's operations (the standard's `/cob`, `/loc`… live under it). */
export const API_PIX_PREFIX = '/api/pix/v2';

/**
 * The resource groups of /api/pix/v2, each a function mounting its routes (declared with
 * `pixRoute`, src/api/apiPix/spec.ts) on the authenticated scope. A new resource of the standard is
 * one module and one line here.
 */
export type PixRouteGroup = (app: FastifyInstance, ctx: AppContext) => Promise<void> | void;
const V2_GROUPS: PixRouteGroup[] = [
  cobRoutes,
  cobvRoutes, // /cobv
  loteCobvRoutes, // /lotecobv
  locRoutes,
  pixRoutes, // /pix, /pix/{e2eid}/devolucao/{id}, /webhook
];

/**
 * The API Pix façade (issue 27, docs/api-pix.md): the token endpoint at /api/pix/oauth/token and
 * the standard's operations under /api/pix/v2, behind the bearer pipeline. Registered with the
 * prefix /api/pix.
 */
export function apiPixRoutes(ctx: AppContext) {
  return async function apiPix(app: FastifyInstance) {
    await app.register(async (scope) => oauthRoutes(scope, ctx));
    await app.register(
      async (v2) => {
        // The standard's reads and DELETE take no body: one sent is ignored, never parsed (a
        // malformed or oversized one would otherwise be refused with a status they do not list).
        v2.addHook('onRequest', async (req) => {
          if (req.method !== 'GET' && req.method !== 'DELETE') return;
          delete req.headers['content-type'];
          delete req.headers['transfer-encoding'];
          req.headers['content-length'] = '0';
        });
        installBearerPipeline(v2, ctx);
        v2.setNotFoundHandler((req: FastifyRequest, reply: FastifyReply) => {
          const malformed = malformedUrlMessage(req);
          // A malformed URL is 400, as every write and read of the standard lists; the one DELETE
          // (a location's txid) lists no 400, and such a URL names no location: 404.
          const answer =
            malformed !== null && req.method !== 'DELETE' ? pixProblem(400, 'RequisicaoInvalida', malformed) : pixProblem(404, 'NaoEncontrado', malformed ?? 'Recurso não encontrado');
          return reply.code(answer.statusCode).headers(answer.headers).send(answer.body);
        });
        for (const group of V2_GROUPS) await group(v2, ctx);
      },
      { prefix: '/v2' },
    );
  };
}
