import type { FastifyInstance } from 'fastify';
import type { AppContext } from '../context.js';
import { parseOrThrow } from '../http/validation.js';
import { mount } from '../http/routeSpec.js';
import { report, resolve, sandboxApi as api } from './sandbox.api.js';
import { infractionId } from '../med/merchant.js';
import { SimulatedRail } from '../rail/sim/simulatedRail.js';
import { openInfraction, resolveInfraction } from './actions.js';

/**
 * MED controls of contract section 4: the payer's side reports an infraction against a PIX this
 * institution received, and the central bank's final decision resolves it. Each call answers after
 * the service applied its effect, with the MED record as the merchant sees it (docs/med.md).
 */
export async function medSandboxRoutes(app: FastifyInstance, ctx: AppContext) {
  const sim = ctx.rail;
  if (!(sim instanceof SimulatedRail)) return;

  mount(app, api.reportInfraction, async (req, reply) => {
    const body = parseOrThrow(report, req.body);
    return reply.code(201).send(await openInfraction(ctx, sim, { endToEndId: body.end_to_end_id, amountCents: body.amount, reason: body.reason }));
  });

  mount(app, api.resolveInfraction, async (req) => {
    const id = infractionId((req.params as { id: string }).id);
    const { decision } = parseOrThrow(resolve, req.body);
    return resolveInfraction(ctx, sim, id, decision);
  });
}
