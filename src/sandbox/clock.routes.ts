import type { FastifyInstance } from 'fastify';
import type { AppContext } from '../context.js';
import { badRequest } from '../http/errors.js';
import { mount } from '../http/routeSpec.js';
import { parseOrThrow } from '../http/validation.js';
import { advanceOffset, MAX_OFFSET_SECONDS, SandboxClock } from '../lib/sandboxClock.js';
import { advanceBody, clockApi } from './clock.api.js';

/**
 * `GET /clock` and `POST /clock/advance {seconds}` (docs/sandbox-clock.md). The offset is a row
 * of the database: the advance commits it with a notification that every process's clock follows,
 * and the GET reads it, so any process answers the installation's time.
 */
export async function clockSandboxRoutes(app: FastifyInstance, ctx: AppContext) {
  const clock = ctx.clock;
  if (!(clock instanceof SandboxClock)) return;
  const answer = () => ({ now: clock.now().toISOString(), offset_seconds: clock.offsetSeconds() });

  mount(app, clockApi.getClock, async () => {
    await clock.load(ctx.db);
    return answer();
  });
  mount(app, clockApi.advanceClock, async (req) => {
    await advanceClock(ctx, clock, parseOrThrow(advanceBody, req.body).seconds);
    return answer();
  });
}

/**
 * Moves the installation's simulated time forward by `seconds` (validated by `advanceBody`): this
 * process's clock at once, the others on the notification. Throws the 400 past MAX_OFFSET_SECONDS.
 * The sandbox API and the portal's sandbox panel call it.
 */
export async function advanceClock(ctx: Pick<AppContext, 'db' | 'log'>, clock: SandboxClock, seconds: number): Promise<number> {
  const offset = await advanceOffset(ctx.db, seconds);
  if (offset === null) throw badRequest({ seconds: [`would move the clock more than ${MAX_OFFSET_SECONDS} seconds (10 years) ahead of real time`] });
  clock.apply(offset);
  ctx.log.info({ seconds, offset_seconds: offset }, 'sandbox clock advanced');
  return offset;
}
