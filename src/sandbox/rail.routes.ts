import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import type { AppContext } from '../context.js';
import { parseOrThrow } from '../http/validation.js';
import { SimulatedRail } from '../rail/simulator.js';

/** At most an hour: a stall is a fault to exercise, not a state to keep. */
const MAX_STALL_MS = 3_600_000;
const stallBody = z.strictObject({
  delay_ms: z.number().int().min(0).max(MAX_STALL_MS),
  drop: z.boolean().optional(),
});

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
  app.get('/rail/stall', async () => sim.readStall());
  app.put('/rail/stall', async (req) => {
    const body = parseOrThrow(stallBody, req.body);
    return sim.setStall({ delay_ms: body.delay_ms, drop: body.drop ?? false });
  });
}
