import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { AppContext } from '../../context.js';
import { DomainError } from '../../errors/catalog.js';
import { keyBinding, principal } from '../../external/pipeline.js';
import { cashOut } from '../../pix/cashOut.js';
import { parseCashOut, type CashOutCommand } from '../../pix/cashOutCommand.js';
import { mount } from '../../http/routeSpec.js';
import { pixApi } from './pix.api.js';

/** POST /pix/cash-out (transfer:write). */
export async function cashOutRoutes(app: FastifyInstance, ctx: AppContext) {
  mount(app, pixApi.cashOut, async (req, reply) => {
    const command = parseCashOut(req.body);
    const { merchantId, accountId } = principal(req);
    try {
      const answer = await cashOut(ctx, { merchantId, accountId }, command, keyBinding(req));
      return reply.code(answer.statusCode).send(answer.body);
    } catch (err) {
      throw ctx.config.appEnv === 'local' ? withSandboxHint(err, command, req) : err;
    }
  });
}

/**
 * In local mode a key missing from the directory is almost always a key nobody registered in the
 * simulator yet: the answer's `detail` (pixgate's free text; the spec's `errors` map keeps its
 * message verbatim) says how to register it as another bank's key.
 */
function withSandboxHint(err: unknown, command: CashOutCommand, req: FastifyRequest): unknown {
  if (!(err instanceof DomainError) || err.code !== 'destination_not_found') return err;
  const body = JSON.stringify({ key: command.key, type: command.keyType, name: 'Maria', document: '52998224725', ispb: '18236120' });
  const url = `${req.protocol}://${req.headers.host ?? '127.0.0.1:8080'}/api/sandbox/dict/keys`;
  return new DomainError('destination_not_found', {
    detail:
      `${err.detail}. Local sandbox: register it as a key of another bank (the admin token is in \`npm run pixgate -- local-credentials\`): ` +
      `curl -H "Authorization: Bearer $ADMIN_TOKEN" -H 'content-type: application/json' -d '${body}' ${url}`,
    ...(err.extra ? { extra: err.extra } : {}),
  });
}
