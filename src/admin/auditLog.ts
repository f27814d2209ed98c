import { createHash } from 'node:crypto';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { AppContext } from '../context.js';
import type { Sql } from '../db/db.js';
import { resolveClientIp } from '../http/clientIp.js';

/**
 * The operator audit log: one row per authenticated write (any method but GET, HEAD and OPTIONS)
 * of the admin and sandbox APIs, written by one hook (`auditOperatorWrites`) that both plugins
 * install next to the token check, so no route can forget it. The row is written before the
 * answer leaves (`onSend`), with the status being answered; the secret never is.
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
  status: number;
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

export async function insertAuditRow(sql: Sql, row: Omit<AuditRow, 'id'>): Promise<void> {
  await sql.query(
    `INSERT INTO admin_audit_log (at, actor, client_ip, method, route, target, request_id, status)
     VALUES ($1, $2, $3, $4, $5, $6::jsonb, $7, $8)`,
    [row.at, row.actor, row.client_ip, row.method, row.route, JSON.stringify(row.target), row.request_id, row.status],
  );
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

/** Installs the audit hook on a plugin (admin and sandbox). */
export function auditOperatorWrites(app: FastifyInstance, ctx: AppContext): void {
  const actor = tokenActor(ctx.config.adminToken);
  app.addHook('onSend', async (req: FastifyRequest, reply: FastifyReply, payload: unknown) => {
    if (req.method === 'GET' || req.method === 'HEAD' || req.method === 'OPTIONS' || !AUTHENTICATED.has(req)) return payload;
    try {
      await insertAuditRow(ctx.db, {
        at: ctx.clock.now(),
        actor,
        client_ip: resolveClientIp(req.socket.remoteAddress ?? '', req.headers['x-forwarded-for'], ctx.config.trustedProxies),
        method: req.method,
        route: req.routeOptions.url ?? '(no route)',
        target: targetOf(req, reply.statusCode, payload),
        request_id: String(req.id),
        status: reply.statusCode,
      });
    } catch (err) {
      // The write itself has committed; losing its audit row must not turn the answer into an error.
      req.log.error({ err: (err as Error).message, request_id: req.id }, 'admin audit log write failed');
    }
    return payload;
  });
}
