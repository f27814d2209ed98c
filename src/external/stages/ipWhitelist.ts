import type { Authenticated } from '../../auth/credentials.js';
import { whitelistAllows } from '../../auth/ipWhitelist.js';
import { keyUsageFor } from '../../auth/keyUsage.js';
import { pipelineError, SHAPE1, type HttpError } from '../../http/errors.js';
import { auth } from './request.js';
import type { Stage } from './stage.js';

/** Stage 4's refusal of `key` from `clientIp` (whitelist, then the account and merchant status). */
export function whitelistRefusal(key: Authenticated['key'], clientIp: string): HttpError | undefined {
  if (key.ip_whitelist.length === 0) return pipelineError(403, SHAPE1.emptyWhitelist);
  if (!whitelistAllows(key.ip_whitelist, clientIp)) return pipelineError(403, SHAPE1.ipNotListed);
  if (key.operating_account_id === null || key.account_status !== 'active' || key.merchant_status !== 'active') {
    return pipelineError(403, SHAPE1.accountInactive);
  }
  return undefined;
}

/** Stage 4: the client IP is in the key's whitelist, and its account and merchant are active. */
export const ipWhitelistStage: Stage = {
  n: 4,
  name: 'ip-whitelist',
  phase: 'onRequest',
  applies: () => true,
  run(req, _reply, { ctx }) {
    const { key } = auth(req);
    const refused = whitelistRefusal(key, req.ext.clientIp);
    if (refused) throw refused;
    // The key's last use (the portal's keys page): at most one write per key a minute, never awaited.
    keyUsageFor(ctx.db)
      .record(key.client_id, req.ext.clientIp, ctx.clock.now())
      ?.catch((err: unknown) => req.log.warn({ err: (err as Error).message }, 'api key usage not recorded'));
  },
};
