import type { FastifyRequest } from 'fastify';
import { insertAuditRow } from '../admin/auditLog.js';
import type { AppContext } from '../context.js';
import { endCompanion, runWithCompanion, type TransactionCompanion } from '../db/db.js';
import { resolveClientIp } from '../http/clientIp.js';
import { asHttpError } from '../http/errorMap.js';

/**
 * Every operator write of the console lands in the operator audit log (admin_audit_log, the same
 * log as the admin API's) in the write's own transaction, with the operator's identity
 * (`operator:<username>`): the same transaction companion as src/admin/auditLog.ts joins the first
 * transaction the domain function runs, so the write cannot commit without its row. The status and
 * the ids the write produced are filled in after it; a write that committed nothing gets its row
 * then, with its refusal's status.
 */
export async function auditedWrite<T>(
  ctx: AppContext,
  req: FastifyRequest,
  actor: string,
  target: Record<string, unknown>,
  run: () => Promise<T>,
  produced: (result: T) => Record<string, unknown> = () => ({}),
): Promise<T> {
  const row = (status: number | null, extra: Record<string, unknown> = {}) => ({
    at: ctx.wallClock.now(),
    actor,
    client_ip: resolveClientIp(req.socket.remoteAddress ?? '', req.headers['x-forwarded-for'], ctx.config.trustedProxies),
    method: req.method,
    route: req.routeOptions.url ?? req.url.split('?')[0]!,
    target: { ...target, ...extra },
    request_id: String(req.id),
    status,
  });
  let rowId: number | undefined;
  const first = row(null);
  const companion: TransactionCompanion = {
    state: 'waiting',
    write: async (tx) => {
      rowId = await insertAuditRow(tx, first);
    },
  };
  try {
    const result = await runWithCompanion(companion, run);
    endCompanion(companion);
    const done = row(200, produced(result));
    await ctx.db.query('UPDATE admin_audit_log SET status = 200, target = $2::jsonb WHERE id = $1 AND request_id = $3 AND status IS NULL', [
      rowId,
      JSON.stringify(done.target),
      first.request_id,
    ]);
    return result;
  } catch (err) {
    const committed = companion.state === 'committed';
    endCompanion(companion);
    const status = asHttpError(err, 'business')?.statusCode ?? 500;
    try {
      if (committed) await ctx.db.query('UPDATE admin_audit_log SET status = $2 WHERE id = $1 AND status IS NULL', [rowId, status]);
      else await insertAuditRow(ctx.db, row(status));
    } catch (auditErr) {
      req.log.error({ err: (auditErr as Error).message }, 'console audit row failed');
    }
    throw err;
  }
}
