import type { FastifyInstance, FastifyRequest } from 'fastify';
import { createLocation, getLocation, listLocations, locationUrl, unlinkLocation } from '../../apiPix/locations.js';
import type { AppContext } from '../../context.js';
import { DomainError } from '../../errors/catalog.js';
import { parseFields } from '../../errors/fields.js';
import { mount } from '../../http/routeSpec.js';
import { pixCaller } from './bearer.js';
import { jsonObjectBody, paginacao, parseListQuery } from './listQuery.js';
import { locApi, locBody, locIdParam, locListQuery } from './loc.api.js';
import { locationView } from './views.js';

/** The `loc` operations of /api/pix/v2 (src/apiPix/locations.ts underneath). */
function locId(req: FastifyRequest): number {
  const parsed = locIdParam.safeParse(req.params);
  if (!parsed.success) throw new DomainError('not_found', { message: 'Location não encontrada' });
  return parsed.data.id;
}

export async function locRoutes(app: FastifyInstance, ctx: AppContext) {
  const host = ctx.config.apiPixLocationHost;

  mount(app, locApi.create, async (req, reply) => {
    const { tipoCob } = parseFields(locBody, jsonObjectBody(req.body));
    const loc = await createLocation(ctx, pixCaller(req).accountId, tipoCob);
    return reply.code(201).header('location', locationUrl(host, loc.token, loc.tipo_cob)).send(locationView(host, loc, false));
  });

  mount(app, locApi.get, async (req) => locationView(host, await getLocation(ctx, pixCaller(req).accountId, locId(req))));

  mount(app, locApi.unlink, async (req) => locationView(host, await unlinkLocation(ctx, pixCaller(req).accountId, locId(req)), false));

  mount(app, locApi.list, async (req) => {
    const { query, page } = parseListQuery(locListQuery, req.query);
    const { rows, total } = await listLocations(ctx, {
      accountId: pixCaller(req).accountId,
      from: page.from,
      to: page.to,
      ...(query.txIdPresente !== undefined ? { txidPresent: query.txIdPresente } : {}),
      ...(query.tipoCob !== undefined ? { tipoCob: query.tipoCob } : {}),
      offset: page.offset,
      limit: page.perPage,
    });
    return {
      parametros: {
        inicio: query.inicio,
        fim: query.fim,
        ...(query.txIdPresente !== undefined ? { txIdPresente: query.txIdPresente } : {}),
        ...(query.tipoCob !== undefined ? { tipoCob: query.tipoCob } : {}),
        paginacao: paginacao(page, total),
      },
      loc: rows.map((row) => locationView(host, row)),
    };
  });
}
