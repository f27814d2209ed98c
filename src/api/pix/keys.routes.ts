import type { FastifyInstance } from 'fastify';
import type { AppContext } from '../../context.js';
import { principal } from '../../external/pipeline.js';
import { isoZ } from '../../lib/clock.js';
import { listOwnKeys } from '../../pix/ownKeys.js';
import { mount } from '../../http/routeSpec.js';
import { pixApi } from './pix.api.js';

/** GET /pix/keys (permission pix:read): the PIX keys of the key's account, oldest first. */
export async function pixKeyRoutes(app: FastifyInstance, ctx: AppContext) {
  mount(app, pixApi.listKeys, async (req) => {
    const keys = await listOwnKeys(ctx.db, principal(req).accountId);
    return {
      worked: true,
      data: keys.map((k) => ({ type: k.type, key: k.key, status: k.status, created_at: isoZ(k.created_at) })),
    };
  });
}
