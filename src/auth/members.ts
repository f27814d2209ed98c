import { createHash, randomBytes } from 'node:crypto';
import type { Database, Sql } from '../db/db.js';
import { DomainError, invalidFields } from '../errors/catalog.js';
import type { Clock } from '../lib/clock.js';
import { writeAudit, type Actor } from './merchantAudit.js';
import { decoyHash, hashPassword, passwordProblem, verifyPassword } from './passwords.js';
import { isRole, mayManage, type Role } from './roles.js';
import { verifyTotp } from './totp.js';

/**
 * A merchant's team (migration 1610; docs/portal.md "Team members"): invitations with a one-time
 * set-password link, roles, removal, the TOTP second factor and the owner's "require it for
 * everyone". Every change writes its audit row in its own transaction.
 */
export const INVITE_TTL_MS = 7 * 24 * 3600_000;
const EMAIL = /^[^\s@]{1,64}@[^\s@]{1,189}\.[^\s@]{1,60}$/;

export interface MemberRow {
  id: number;
  merchant_id: number;
  email: string;
  name: string;
  role: Role;
  status: 'invited' | 'active' | 'removed';
  password_hash: string | null;
  totp_secret: string | null;
  totp_last_step: number | null;
  invite_expires_at: Date | null;
  created_at: Date;
}

export interface MemberDeps {
  db: Database;
  clock: Clock;
  /** Real time for these security windows (AppContext.wallClock; default `clock`): the sandbox clock does not move them. */
  wallClock?: Clock;
}

const sha256 = (s: string) => createHash('sha256').update(s, 'utf8').digest('hex');
const norm = (r: MemberRow): MemberRow => ({
  ...r,
  id: Number(r.id),
  merchant_id: Number(r.merchant_id),
  totp_last_step: r.totp_last_step === null ? null : Number(r.totp_last_step),
});

export async function findMember(sql: Sql, id: number): Promise<MemberRow | undefined> {
  const [row] = await sql.query<MemberRow>('SELECT * FROM merchant_members WHERE id = $1', [id]);
  return row ? norm(row) : undefined;
}

export async function listMembers(sql: Sql, merchantId: number): Promise<MemberRow[]> {
  const rows = await sql.query<MemberRow>(`SELECT * FROM merchant_members WHERE merchant_id = $1 AND status <> 'removed' ORDER BY id`, [merchantId]);
  return rows.map(norm);
}

/** The merchant row locked: member changes of one merchant run one at a time (the last-owner rule). */
async function lockMerchant(tx: Sql, merchantId: number): Promise<{ require_totp: boolean }> {
  const [m] = await tx.query<{ require_totp: boolean }>('SELECT require_totp FROM merchants WHERE id = $1 FOR UPDATE', [merchantId]);
  if (!m) throw new DomainError('not_found', { message: 'Merchant not found' });
  return m;
}

async function owners(tx: Sql, merchantId: number): Promise<number> {
  const [row] = await tx.query<{ n: number }>(`SELECT count(*)::int AS n FROM merchant_members WHERE merchant_id = $1 AND role = 'owner' AND status <> 'removed'`, [merchantId]);
  return row!.n;
}

export interface Invitation {
  member: MemberRow;
  /** The one-time token of the set-password link (/portal/invite/<token>); only its digest is stored. */
  token: string;
}

export interface InviteInput {
  email: string;
  name: string;
  role: string;
}

/**
 * Invites a member: `actorRole` null is the merchant's API key creating the first owner (only when
 * the merchant has none); otherwise the role rules of roles.ts `mayManage` apply.
 */
export async function inviteMember(deps: MemberDeps, actor: Actor, actorRole: Role | null, merchantId: number, input: InviteInput): Promise<Invitation> {
  const email = input.email.trim().toLowerCase();
  const name = input.name.trim();
  const fields: Record<string, string[]> = {};
  if (!EMAIL.test(email)) fields.email = ['is not an email address'];
  if (name.length > 120) fields.name = ['must have at most 120 characters'];
  if (!isRole(input.role)) fields.role = ['is not a role'];
  if (Object.keys(fields).length) throw invalidFields(fields);
  const role = input.role as Role;
  return deps.db.transaction(async (tx) => {
    await lockMerchant(tx, merchantId);
    if (actorRole === null) {
      if (role !== 'owner' || (await owners(tx, merchantId)) > 0) throw new DomainError('conflict', { message: 'The merchant already has an owner: the owner invites members' });
    } else if (!mayManage(actorRole, null, role)) {
      throw new DomainError('conflict', { message: `A member of role ${actorRole} cannot invite a ${role}` });
    }
    const [taken] = await tx.query(`SELECT 1 FROM merchant_members WHERE email = $1 AND status <> 'removed'`, [email]);
    if (taken) throw invalidFields({ email: ['is already a member'] });
    const token = randomBytes(32).toString('base64url');
    const now = (deps.wallClock ?? deps.clock).now();
    const [row] = await tx.query<MemberRow>(
      `INSERT INTO merchant_members (merchant_id, email, name, role, invite_token_hash, invite_expires_at, created_at, updated_at)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $7) RETURNING *`,
      [merchantId, email, name, role, sha256(token), new Date(now.getTime() + INVITE_TTL_MS), now],
    );
    const member = norm(row!);
    await writeAudit(tx, merchantId, actor, 'member.invited', { member_id: member.id, email, role }, now);
    return { member, token };
  });
}

/** The invitation of a token, while it is valid. */
export async function findInvitation(sql: Sql, token: string, now: Date): Promise<MemberRow | undefined> {
  if (!/^[A-Za-z0-9_-]{43}$/.test(token)) return undefined;
  const [row] = await sql.query<MemberRow>(
    `SELECT * FROM merchant_members WHERE invite_token_hash = $1 AND status = 'invited' AND invite_expires_at > $2`,
    [sha256(token), now],
  );
  return row ? norm(row) : undefined;
}

/** Sets the invited member's password (the link works once) and activates them. */
export async function acceptInvitation(deps: MemberDeps, token: string, password: string, ip: string | null): Promise<MemberRow> {
  const problem = passwordProblem(password);
  if (problem) throw invalidFields({ password: [problem] });
  const hash = await hashPassword(password);
  return deps.db.transaction(async (tx) => {
    const now = (deps.wallClock ?? deps.clock).now();
    const [row] = await tx.query<MemberRow>(
      `UPDATE merchant_members SET password_hash = $2, status = 'active', invite_token_hash = NULL, invite_expires_at = NULL, updated_at = $3
        WHERE invite_token_hash = $1 AND status = 'invited' AND invite_expires_at > $3 RETURNING *`,
      [sha256(token), hash, now],
    );
    if (!row) throw new DomainError('not_found', { message: 'This invitation link is not valid (used, expired or unknown)' });
    const member = norm(row);
    await writeAudit(tx, member.merchant_id, { type: 'member', id: String(member.id), label: member.email, ip }, 'member.activated', { member_id: member.id }, now);
    return member;
  });
}

/** The active member of `email` whose password is `password`; one scrypt either way. */
export async function checkPassword(sql: Sql, email: string, password: string): Promise<MemberRow | undefined> {
  const [row] = await sql.query<MemberRow>(`SELECT * FROM merchant_members WHERE email = $1 AND status = 'active'`, [email.trim().toLowerCase().slice(0, 254)]);
  const ok = await verifyPassword(password, row?.password_hash ?? (await decoyHash()));
  return row && ok ? norm(row) : undefined;
}

/** Changes a member's role (`to`) or removes them (`to` null), under the role rules and the last-owner rule. */
export async function changeMember(deps: MemberDeps, actor: Actor, actorRole: Role, merchantId: number, memberId: number, to: Role | null): Promise<MemberRow> {
  return deps.db.transaction(async (tx) => {
    await lockMerchant(tx, merchantId);
    const [row] = await tx.query<MemberRow>(`SELECT * FROM merchant_members WHERE id = $1 AND merchant_id = $2 AND status <> 'removed'`, [memberId, merchantId]);
    if (!row) throw new DomainError('not_found', { message: 'Member not found' });
    if (!mayManage(actorRole, row.role, to)) throw new DomainError('conflict', { message: `A member of role ${actorRole} cannot change a ${row.role}${to ? ` into a ${to}` : ''}` });
    if (row.role === 'owner' && to !== 'owner' && (await owners(tx, merchantId)) <= 1) {
      throw new DomainError('conflict', { message: 'The last owner cannot be removed or given another role' });
    }
    const now = (deps.wallClock ?? deps.clock).now();
    const [changed] = await tx.query<MemberRow>(
      to === null
        ? `UPDATE merchant_members SET status = 'removed', invite_token_hash = NULL, updated_at = $2 WHERE id = $1 RETURNING *`
        : `UPDATE merchant_members SET role = $3, updated_at = $2 WHERE id = $1 RETURNING *`,
      to === null ? [memberId, now] : [memberId, now, to],
    );
    if (to === null) await tx.query('DELETE FROM portal_sessions WHERE member_id = $1', [memberId]);
    await writeAudit(tx, merchantId, actor, to === null ? 'member.removed' : 'member.role_changed', { member_id: memberId, from: row.role, to }, now);
    return norm(changed!);
  });
}

/** Stores the member's TOTP secret once a code of it was verified (enrolment). */
export async function enableTotp(deps: MemberDeps, member: MemberRow, secret: string, code: string, ip: string | null): Promise<boolean> {
  const now = (deps.wallClock ?? deps.clock).now();
  const step = verifyTotp(secret, code, now, null);
  if (step === null) return false;
  return deps.db.transaction(async (tx) => {
    const [row] = await tx.query(`UPDATE merchant_members SET totp_secret = $2, totp_last_step = $3, updated_at = $4 WHERE id = $1 AND totp_secret IS NULL RETURNING id`, [
      member.id,
      secret,
      step,
      now,
    ]);
    if (!row) return false;
    await writeAudit(tx, member.merchant_id, { type: 'member', id: String(member.id), label: member.email, ip }, 'member.totp_enabled', { member_id: member.id }, now);
    return true;
  });
}

/** Checks a code of the member's second factor and spends its step (a replay is refused). */
export async function checkTotp(deps: MemberDeps, memberId: number, code: string): Promise<boolean> {
  const member = await findMember(deps.db, memberId);
  if (!member?.totp_secret) return false;
  const step = verifyTotp(member.totp_secret, code, (deps.wallClock ?? deps.clock).now(), member.totp_last_step);
  if (step === null) return false;
  const [spent] = await deps.db.query(
    'UPDATE merchant_members SET totp_last_step = $2 WHERE id = $1 AND (totp_last_step IS NULL OR totp_last_step < $2) RETURNING id',
    [memberId, step],
  );
  return spent !== undefined;
}

/** The owner requires (or no longer requires) a second factor of every member. */
export async function setRequireTotp(deps: MemberDeps, actor: Actor, merchantId: number, required: boolean): Promise<void> {
  await deps.db.transaction(async (tx) => {
    await lockMerchant(tx, merchantId);
    await tx.query('UPDATE merchants SET require_totp = $2 WHERE id = $1', [merchantId, required]);
    await writeAudit(tx, merchantId, actor, 'team.require_totp_changed', { required }, (deps.wallClock ?? deps.clock).now());
  });
}
