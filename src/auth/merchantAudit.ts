import type { Sql } from '../db/db.js';

/**
 * The merchant's audit log (migration 1600): every change of its API keys and team, written in
 * the transaction of the change, so the change and its row commit together or not at all.
 */

/** Who acted: a team member, an API key (its portal session), the operator, or pixgate itself. */
export interface Actor {
  type: 'member' | 'api_key' | 'operator' | 'system';
  /** The member's id, the key's client_id, the operator's audit actor; '' for the system. */
  id: string;
  /** The member's email, for people reading the log. */
  label?: string;
  ip: string | null;
}

export const SYSTEM_ACTOR: Actor = { type: 'system', id: '', ip: null };

/** The actor as events and the log carry it (never a secret). */
export function actorView(a: Actor): { type: Actor['type']; id: string | null } {
  return { type: a.type, id: a.id === '' ? null : a.id };
}

export const actorText = (a: Actor) => `${a.type}:${a.id}${a.label ? ` (${a.label})` : ''}`.slice(0, 200);

export async function writeAudit(tx: Sql, merchantId: number, actor: Actor, action: string, target: Record<string, unknown>, at: Date): Promise<void> {
  await tx.query(
    `INSERT INTO merchant_audit_log (merchant_id, at, actor, client_ip, action, target) VALUES ($1, $2, $3, $4, $5, $6::jsonb)`,
    [merchantId, at, actorText(actor), actor.ip, action, JSON.stringify(target)],
  );
}

export interface MerchantAuditRow {
  id: number;
  at: Date;
  actor: string;
  client_ip: string | null;
  action: string;
  target: Record<string, unknown>;
}

/** The merchant's newest rows first. */
export async function listAudit(sql: Sql, merchantId: number, limit = 50): Promise<MerchantAuditRow[]> {
  const rows = await sql.query<MerchantAuditRow>(
    'SELECT id, at, actor, client_ip, action, target FROM merchant_audit_log WHERE merchant_id = $1 ORDER BY id DESC LIMIT $2',
    [merchantId, limit],
  );
  return rows.map((r) => ({ ...r, id: Number(r.id) }));
}
