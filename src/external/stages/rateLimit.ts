import { pipelineError, SHAPE1 } from '../../http/errors.js';
import type { WindowHit } from '../../ratelimit/fixedWindow.js';
import { rateLimited, rateWindow } from './request.js';
import type { Stage } from './stage.js';

/** Stage 6: requests per client IP per minute (429 with Retry-After: 60); GET /balance is exempt. */
export const rateLimitStage: Stage = {
  n: 6,
  name: 'rate-limit',
  phase: 'preHandler',
  applies: rateLimited,
  async run(req, _reply, { ctx, rateLimiter }) {
    let hit: WindowHit;
    try {
      // Counted already when stage 5 claimed a v2 nonce in the same Redis round trip.
      const window = req.ext.rateLimitCounted ?? rateWindow(req, ctx);
      hit = 'allowed' in window ? window : await rateLimiter.hit(window.key, window.limit, window.windowSeconds);
    } catch (err) {
      // The limiter protects capacity, not money: when its store is down, requests pass.
      req.log.warn({ err: (err as Error).message }, 'rate limiter unavailable; request allowed');
      return;
    }
    if (!hit.allowed) throw pipelineError(429, SHAPE1.rateLimited, {}, { 'retry-after': '60' });
    req.ext.rateLimit = hit;
  },
};
