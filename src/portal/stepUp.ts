import type { FastifyReply, FastifyRequest } from 'fastify';
import type { Portal } from './kit.js';
import { steppedUp } from './session.js';

/**
 * Sensitive actions (docs/portal.md "Step-up"): creating, rotating or revoking API keys, changing
 * the team, webhook secrets and payouts from the portal. A member's session passes when a TOTP code
 * was typed in the last STEP_UP_MS (src/portal/session.ts); otherwise the action does not run and
 * the member is sent to /portal/step-up, which comes back to `back`. An API key's session (the
 * portal's original sign-in) has no second factor: it keeps the actions its permissions allowed
 * before (webhooks, TEF); the key and team pages are for members only.
 *
 * Returns the reply when the action must not run, null when it may.
 */
export function stepUpRequired(portal: Portal, req: FastifyRequest, reply: FastifyReply, back: string): FastifyReply | null {
  const s = req.portal!;
  if (!s.member) return null;
  if (steppedUp(portal.ctx, s)) return null;
  return reply.redirect(`/portal/step-up?next=${encodeURIComponent(safeNext(back))}`, 303);
}

/** A path of this portal to come back to (never another site). */
export function safeNext(next: unknown): string {
  return typeof next === 'string' && /^\/portal(\/[A-Za-z0-9_\-/.?=&%]*)?$/.test(next) && !next.startsWith('//') && next.length <= 512 ? next : '/portal';
}
