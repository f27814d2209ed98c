import Fastify, { LogController, type FastifyInstance, type FastifyReply, type FastifyRequest } from 'fastify';
import { adminRoutes } from './admin/routes.js';
import { apiPixPayloadRoutes } from './api/apiPix/payload.routes.js';
import { apiPixRoutes } from './api/apiPix/routes.js';
import { boletoRoutes } from './api/boleto/routes.js';
import type { AppContext } from './context.js';
import { externalRoutes, type ExternalPlugin } from './api/external.routes.js';
import { healthRoutes } from './health.js';
import { sandboxRoutes } from './sandbox/routes.js';
import { clientErrorHandler, errorHandler, frameworkErrors, MAX_PATH_SEGMENT_LENGTH, notFoundHandler, rewriteMalformedUrl } from './http/errorHandler.js';
import { useJsonBodyParser } from './http/jsonBody.js';
import { genRequestId } from './http/requestId.js';
import { metricsRoutes } from './api/metrics.routes.js';
import { openApiRoutes } from './openapi/routes.js';
import { portalRoutes } from './portal/routes.js';
import { consoleRoutes } from './console/routes.js';

/** Largest request body accepted anywhere (JSON payloads of this API are small). */
export const BODY_LIMIT_BYTES = 1024 * 1024;

/** One log line per request, when it completes (method, path, status, time). */
class RequestLog extends LogController {
  override incomingRequest() {}
  override requestCompleted(error: Error | null | undefined, request: FastifyRequest, reply: FastifyReply) {
    const line = { method: request.method, url: request.url, ip: request.ip, status: reply.statusCode, ms: Math.round(reply.elapsedTime * 10) / 10 };
    if (error) reply.log.error({ ...line, err: error }, 'request errored');
    else reply.log.info(line, 'request completed');
  }
}

/**
 * Builds the Fastify app that serves every prefix of the operator contract, from dependencies
 * built elsewhere. It never listens: server.ts does, tests do on a random port.
 */
export interface BuildOptions {
  externalPlugins?: readonly ExternalPlugin[];
  /** Called on the root instance before any route is registered (tests install observing hooks). */
  onApp?: (app: FastifyInstance) => void;
}

export async function buildApp(ctx: AppContext, options: BuildOptions = {}): Promise<FastifyInstance> {
  const app = Fastify({
    loggerInstance: ctx.log,
    genReqId: genRequestId,
    logController: new RequestLog({ requestIdLogLabel: 'request_id' }),
    bodyLimit: BODY_LIMIT_BYTES,
    return503OnClosing: true,
    rewriteUrl: rewriteMalformedUrl,
    frameworkErrors,
    clientErrorHandler,
    routerOptions: { maxParamLength: MAX_PATH_SEGMENT_LENGTH },
    // A client certificate is asked for but not required (the API Pix façade binds one to a key: docs/api-pix.md).
    ...(ctx.config.tls ? { https: { cert: ctx.config.tls.cert, key: ctx.config.tls.key, minVersion: 'TLSv1.2' as const, requestCert: true, rejectUnauthorized: false } } : {}),
  }) as unknown as FastifyInstance;

  app.addHook('onRequest', async (req, reply) => {
    void reply.header('x-request-id', req.id);
  });
  // One measurement per answered request, by route pattern (src/metrics).
  app.addHook('onResponse', async (req, reply) => {
    ctx.metrics.httpRequest(req.method, req.routeOptions.url ?? 'unmatched', reply.statusCode, reply.elapsedTime / 1000, reply.getHeader('x-idempotent-replay') === 'true');
  });
  app.setErrorHandler(errorHandler);
  useJsonBodyParser(app);
  app.setNotFoundHandler(notFoundHandler);
  options.onApp?.(app);

  await app.register(healthRoutes(ctx));
  await app.register(metricsRoutes(ctx));
  await app.register(openApiRoutes);
  await app.register(adminRoutes(ctx), { prefix: '/api/admin' });
  await app.register(externalRoutes(ctx, options.externalPlugins), { prefix: '/api/external' });
  await app.register(boletoRoutes(ctx), { prefix: '/api/v1/central' });
  await app.register(sandboxRoutes(ctx), { prefix: '/api/sandbox' });
  await app.register(apiPixRoutes(ctx), { prefix: '/api/pix' });
  await app.register(apiPixPayloadRoutes(ctx));
  await app.register(portalRoutes(ctx));
  if (ctx.config.consoleEnabled) await app.register(consoleRoutes(ctx));
  return app;
}
