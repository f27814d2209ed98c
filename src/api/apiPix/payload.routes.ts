import type { FastifyInstance } from 'fastify';
import { centsToDecimal } from '../../apiPix/amount.js';
import { cobOfLocationToken } from '../../apiPix/cobs.js';
import type { AppContext } from '../../context.js';
import { DomainError } from '../../errors/catalog.js';
import { isoZ } from '../../lib/clock.js';
import { installationSigner } from '../../apiPix/signingKey.js';
import type { JwsSigner } from '../../lib/jws.js';
import { cobvPayloadRoutes } from './cobvPayload.routes.js';

/**
 * The standard's unauthenticated payload read (`GET /{pixUrlAccessToken}`), at the path of
 * pixgate's locations: `GET /qr/v2/<token>` answers the charge linked to the location as a JWS
 * (`application/jose`, RS256) whose payload is the standard's charge payload, and
 * `GET /api/pix/jwks.json` the key set that verifies it. A location that shows no ATIVA charge is
 * 404 CobPayloadNaoEncontrado. The signing key is the installation's (src/apiPix/signingKey.ts;
 * docs/api-pix.md, "Deviations": production PSPs sign with a key bound to their certificate).
 */
export function apiPixPayloadRoutes(ctx: AppContext) {
  let signer: Promise<JwsSigner> | undefined;
  const jws = () => {
    signer ??= installationSigner(ctx.db).catch((err: unknown) => {
      signer = undefined; // read again on the next request
      throw err;
    });
    return signer;
  };
  return async function payload(app: FastifyInstance) {
    app.get(
      '/qr/v2/:pixUrlAccessToken',
      { config: { errorShape: 'api_pix', pixProblems: { invalid: 'CobPayloadOperacaoInvalida', notFound: 'CobPayloadNaoEncontrado' } } },
      async (req, reply) => {
        const { pixUrlAccessToken } = req.params as { pixUrlAccessToken: string };
        const cob = /^[0-9a-f]{32}$/.test(pixUrlAccessToken) ? await cobOfLocationToken(ctx, pixUrlAccessToken) : undefined;
        if (!cob || cob.status !== 'ATIVA') throw new DomainError('not_found', { message: 'A location não apresenta uma cobrança ativa' });
        const r = cob.request;
        const body = {
          calendario: { criacao: isoZ(cob.created_at)!, apresentacao: isoZ(ctx.clock.now())!, expiracao: cob.expiracao },
          txid: cob.txid,
          revisao: cob.revisao,
          ...(r.devedor ? { devedor: r.devedor } : {}),
          status: cob.status,
          valor: { original: centsToDecimal(cob.amount_cents), ...(cob.modalidade_alteracao === 1 ? { modalidadeAlteracao: 1 } : {}) },
          chave: cob.chave,
          ...(r.solicitacaoPagador !== undefined ? { solicitacaoPagador: r.solicitacaoPagador } : {}),
          ...(r.infoAdicionais !== undefined ? { infoAdicionais: r.infoAdicionais } : {}),
        };
        return reply.type('application/jose').header('cache-control', 'no-store').send((await jws()).sign(body, { typ: 'JOSE' }));
      },
    );
    // A cobv's payload read, signed by the same key (src/api/apiPix/cobvPayload.routes.ts).
    await cobvPayloadRoutes(app, ctx, jws);
    app.get('/api/pix/jwks.json', async (_req, reply) => reply.header('cache-control', 'public, max-age=300').send((await jws()).jwks()));
  };
}
