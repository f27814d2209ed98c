import type { FastifyInstance } from 'fastify';
import type { AppContext } from '../context.js';
import { parseOrThrow } from '../http/validation.js';
import { mount } from '../http/routeSpec.js';
import { report, resolve, sandboxApi as api } from './sandbox.api.js';
import { centsToBaseUnits } from '../lib/money.js';
import { MED } from '../med/infractions.js';
import { infractionId, medRecord } from '../med/merchant.js';
import * as med from '../med/repository.js';
import { SimulatedRail } from '../rail/simulator.js';
import { unwrap } from './outcome.js';

/**
 * MED controls of contract section 4: the payer's side reports an infraction against a PIX this
 * institution received, and the central bank's final decision resolves it. Each call answers after
 * the service applied its effect, with the MED record as the merchant sees it (docs/med.md).
 */
export async function medSandboxRoutes(app: FastifyInstance, ctx: AppContext) {
  const sim = ctx.rail;
  if (!(sim instanceof SimulatedRail)) return;

  const view = async (id: string) => {
    const row = await med.findInfraction(ctx.db, id);
    if (!row) throw new Error(`infraction ${id} was not applied in time`);
    return medRecord(row);
  };

  mount(app, api.reportInfraction, async (req, reply) => {
    const body = parseOrThrow(report, req.body);
    const { id } = unwrap(
      await sim.reportInfraction({
        endToEndId: body.end_to_end_id,
        amount: body.amount === undefined ? undefined : centsToBaseUnits(body.amount),
        reason: body.reason ?? MED.defaultReason,
      }),
    );
    return reply.code(201).send(await view(id));
  });

  mount(app, api.resolveInfraction, async (req) => {
    const id = infractionId((req.params as { id: string }).id);
    const { decision } = parseOrThrow(resolve, req.body);
    unwrap(await sim.resolveInfraction(id, decision));
    return view(id);
  });
}
