import type { FastifyInstance } from 'fastify';
import type { AppContext } from '../context.js';
import { mount } from '../http/routeSpec.js';
import { parseOrThrow } from '../http/validation.js';
import { railApi, stallBody } from '../openapi/more.api.js';
import { SimulatedRail } from '../rail/sim/simulatedRail.js';

/**
 * The rail stall switch. `PUT /rail/stall {delay_ms, drop}` makes the simulated central bank take
 * payment and return orders as usual but answer them `delay_ms` late, or never (`drop`: the order is
 * still processed, only its answer is lost). `{delay_ms: 0, drop: false}` clears it. The setting is
 * a row of the simulator's tables, so every process of the installation sees it. Both answer the
 * current setting.
 */
export async function railSandboxRoutes(app: FastifyInstance, ctx: AppContext) {
  const sim = ctx.rail;
  if (!(sim instanceof SimulatedRail)) return;
  mount(app, railApi.getStall, async () => sim.readStall());
  mount(app, railApi.putStall, async (req) => {
    const body = parseOrThrow(stallBody, req.body);
    return sim.setStall({ delay_ms: body.delay_ms, drop: body.drop ?? false });
  });
}
