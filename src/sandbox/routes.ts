import { notFoundHandler } from '../http/errorHandler.js';
import type { FastifyInstance } from 'fastify';
import { auditOperatorWrites } from '../admin/auditLog.js';
import { requireAdminToken } from '../admin/routes.js';
import type { AppContext } from '../context.js';
import { clockSandboxRoutes } from './clock.routes.js';
import { medSandboxRoutes } from './med.routes.js';
import { pixSandboxRoutes } from './pix.routes.js';
import { railSandboxRoutes } from './rail.routes.js';

/**
 * Rail simulator controls (contract section 4), under /api/sandbox, behind the admin bearer token.
 * Not served when APP_ENV=production (the prefix answers 404). Each domain registers its own
 * sandbox routes here.
 */
export function sandboxRoutes(ctx: AppContext) {
  return async function plugin(app: FastifyInstance) {
    app.setNotFoundHandler(notFoundHandler);
    if (ctx.config.appEnv === 'production') return;
    app.addHook('onRequest', requireAdminToken(ctx));
    auditOperatorWrites(app, ctx);
    await pixSandboxRoutes(app, ctx);
    await medSandboxRoutes(app, ctx);
    await railSandboxRoutes(app, ctx);
    await clockSandboxRoutes(app, ctx);
  };
}
