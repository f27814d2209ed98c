import { createHash } from 'node:crypto';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { AppContext } from '../context.js';
import { endCompanion, runWithCompanion, type Sql, type TransactionCompanion } from '../db/db.js';
import { resolveClientIp } from '../http/clientIp.js';

/**
 * The operator audit log: one row per authenticated write (any method but GET, HEAD and OPTIONS)
 * of the admin and sandbox APIs, written by one mechanism (`auditOperatorWrites`) that both plugins
 * install next to the token check, so no route can forget it.
 *
 * The row commits with the operation, never after it: the handler of every operator write runs
 * with a transaction companion (src/db/db.ts) that inserts the row — actor, address, route, path
 * parameters, request id, status still NULL — in the first transaction the operation runs (a
 * statement outside a transaction becomes one). An operation whose row cannot be written rolls back
 * and is answered as failed. As the answer leaves (`onSend`) the row gets its status and the ids the
 * answer names; a write that committed nothing (refused before any statement, or rolled back) gets
 * its row then, best effort, with its status. The secret never is written.
 *
 * The actor of the static ADMIN_TOKEN is `admin-token:` + the first 12 hex digits of its SHA-256:
 * stable for one token, different after a rotation, useless to an attacker. With the client address
 * it says which operator credential did what from where.
 */

export interface AuditRow {
  id: number;
  at: Date;
  actor: string;
  client_ip: string;
  method: string;
  route: string;
  target: Record<string, unknown>;
  request_id: string;
  /** The status answered; null when the operation committed and its answer was never recorded. */
  status: number | null;
}

/** Fields of a 2xx answer that name what the write created or changed (never secrets). */
const TARGET_FIELDS = ['merchant_id', 'account_id', 'transaction_id', 'end_to_end_id', 'client_id', 'id', 'webhook_id', 'delivery_id', 'infraction_id'] as const;

const AUTHENTICATED = new WeakSet<FastifyRequest>();

/** Marks a request whose admin token was valid (called by the token check). */
export function markOperator(req: FastifyRequest): void {
  AUTHENTICATED.add(req);
}

export function tokenActor(token: string): string {
  return `admin-token:${createHash('sha256').update(token, 'utf8').digest('hex').slice(0, 12)}`;
}

export async function insertAuditRow(sql: Sql, row: Omit<AuditRow, 'id'>): Promise<number> {
  const [inserted] = await sql.query<{ id: number }>(
    `INSERT INTO admin_audit_log (at, actor, client_ip, method, route, target, request_id, status)
     VALUES ($1, $2, $3, $4, $5, $6::jsonb, $7, $8) RETURNING id`,
    [row.at, row.actor, row.client_ip, row.method, row.route, JSON.stringify(row.target), row.request_id, row.status],
  );
  return inserted!.id;
}

/** Newest first; `before` is the id cursor of the previous page. */
export async function listAuditRows(sql: Sql, options: { before?: number | undefined; limit: number }): Promise<AuditRow[]> {
  return sql.query<AuditRow>(
    `SELECT id, at, actor, client_ip, method, route, target, request_id, status FROM admin_audit_log
      WHERE ($1::bigint IS NULL OR id < $1) ORDER BY id DESC LIMIT $2`,
    [options.before ?? null, options.limit],
  );
}

export function auditView(r: AuditRow) {
  return {
    id: r.id,
    at: r.at.toISOString(),
    actor: r.actor,
    client_ip: r.client_ip,
    method: r.method,
    route: r.route,
    target: r.target,
    request_id: r.request_id,
    status: r.status,
  };
}

function targetOf(req: FastifyRequest, status: number, payload: unknown): Record<string, unknown> {
  const target: Record<string, unknown> = Object.create(null);
  if (status >= 200 && status < 300 && typeof payload === 'string' && payload.startsWith('{') && payload.length < 1_000_000) {
    try {
      const body = JSON.parse(payload) as Record<string, unknown>;
      for (const f of TARGET_FIELDS) {
        const v = Object.hasOwn(body, f) ? body[f] : undefined;
        if (typeof v === 'number' || (typeof v === 'string' && v.length <= 100)) target[f] = v;
      }
    } catch {
      // not JSON: no ids to pick
    }
  }
  const params = req.params;
  if (params && typeof params === 'object') {
    for (const [k, v] of Object.entries(params as Record<string, unknown>)) {
      if (typeof v === 'string') target[k] = v.slice(0, 100);
    }
  }
  return { ...target };
}

const WRITES = new Set(['POST', 'PUT', 'PATCH', 'DELETE']);

/** The audit state of one operator write: its companion, and the row's id once it committed. */
interface AuditedWrite extends TransactionCompanion {
  rowId?: number;
  /** The row's `request_id` and `at`, which name it with its id (below). */
  rowRequestId?: string;
  rowAt?: Date;
}

const AUDITED = new WeakMap<FastifyRequest, AuditedWrite>();

/** Installs the audit mechanism on a plugin (admin and sandbox): call it before the routes are added. */
export function auditOperatorWrites(app: FastifyInstance, ctx: AppContext): void {
  const actor = tokenActor(ctx.config.adminToken);
  const rowOf = (req: FastifyRequest, status: number | null, payload: unknown): Omit<AuditRow, 'id'> => ({
    at: ctx.wallClock.now(), // the operator trail is real time (the sandbox clock moves business time only)
    actor,
    client_ip: resolveClientIp(req.socket.remoteAddress ?? '', req.headers['x-forwarded-for'], ctx.config.trustedProxies),
    method: req.method,
    route: req.routeOptions.url ?? '(no route)',
    target: targetOf(req, status ?? 0, payload),
    request_id: String(req.id),
    status,
  });

  // Every write route's handler runs with the companion that puts its row in its first transaction.
  // The handler runs only after the token check passed (onRequest), so it is an operator's write.
  app.addHook('onRoute', (route) => {
    const methods = Array.isArray(route.method) ? route.method : [route.method];
    if (!methods.some((m) => WRITES.has(m))) return;
    const handler = route.handler;
    route.handler = function auditedHandler(this: FastifyInstance, req: FastifyRequest, reply: FastifyReply) {
      if (!WRITES.has(req.method) || !AUTHENTICATED.has(req)) return handler.call(this, req, reply);
      const write: AuditedWrite = {
        state: 'waiting',
        write: async (tx) => {
          const row = rowOf(req, null, undefined);
          write.rowId = await insertAuditRow(tx, row);
          write.rowRequestId = row.request_id;
          write.rowAt = row.at;
        },
      };
      AUDITED.set(req, write);
      return runWithCompanion(write, () => handler.call(this, req, reply));
    } as typeof handler;
  });

  app.addHook('onSend', async (req: FastifyRequest, reply: FastifyReply, payload: unknown) => {
    if (!WRITES.has(req.method) || !AUTHENTICATED.has(req)) return payload;
    const write = AUDITED.get(req);
    const committed = write?.state === 'committed' && write.rowId !== undefined;
    if (write) endCompanion(write);
    try {
      if (committed) {
        const row = rowOf(req, reply.statusCode, payload);
        // The row by its id, request id and time, still without a status: after a failover that
        // lost it (asynchronous replication, or a commit whose standby never confirmed), the new
        // primary may have given its id to another operation's row, which must stay as it is.
        await ctx.db.query(
          'UPDATE admin_audit_log SET status = $2, target = $3::jsonb WHERE id = $1 AND request_id = $4 AND at = $5 AND status IS NULL',
          [write!.rowId, row.status, JSON.stringify(row.target), write!.rowRequestId, write!.rowAt],
        );
      } else {
        await insertAuditRow(ctx.db, rowOf(req, reply.statusCode, payload));
      }
    } catch (err) {
      // Nothing of the operation committed without its row (above); this only completes the row
      // (status, ids) or records a write that changed nothing. It must not turn the answer into an error.
      req.log.error({ err: (err as Error).message, request_id: req.id }, 'admin audit log write failed');
    }
    return payload;
  });
  // A safety net: whatever way the answer ended, the companion's scope ends with it (never before
  // the handler has answered, so an operation still running always finds its companion).
  app.addHook('onResponse', async (req) => {
    const write = AUDITED.get(req);
    if (write) endCompanion(write);
  });
}
