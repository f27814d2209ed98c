import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { findKeyForAuth } from '../auth/apiKeys.js';
import { whitelistAllows } from '../auth/ipWhitelist.js';
import { ROLE_CAPABILITIES, type Capability, type Role } from '../auth/roles.js';
import type { AppContext } from '../context.js';
import type { Sql } from '../db/db.js';

/**
 * Portal sessions, of an API key or of a team member (docs/portal.md). Key sign-in checks the API
 * key exactly as the merchant API does (credentials, IP whitelist, account status); member sign-in
 * checks the password (scrypt, once) and the second factor. The cookie then carries a random
 * 256-bit token (stored as its SHA-256). Every later request re-reads the key or the member and
 * applies the same checks and the key's permissions or the member's role, so revoking a key,
 * removing a member or changing a role takes effect at once.
 */
export const SESSION_COOKIE = 'pixgate_portal';
export const SESSION_TTL_MS = 8 * 3600_000;

/** Who acts in a session, as the pages use it: the API key, or the member (no client_id). */
export interface SessionPrincipal {
  client_id: string | null;
  merchant_id: number;
  /** The key's own account (null: merchant-wide; always null for a member). */
  account_id: number | null;
  /** The key's permissions, or the capabilities of the member's role (src/auth/roles.ts). */
  permissions: readonly string[];
}

export interface SessionMember {
  id: number;
  email: string;
  name: string;
  role: Role;
  /** Whether the member has a second factor. */
  totp: boolean;
}

export interface PortalSession {
  tokenHash: string;
  csrf: string;
  key: SessionPrincipal;
  /** The member of a member session; null for an API key's. */
  member: SessionMember | null;
  /** The merchant requires a second factor of every member. */
  requireTotp: boolean;
  /** The password passed, the second factor not yet: only the second-factor pages open. */
  mfaPending: boolean;
  /** Until when a sensitive action needs no new TOTP code (step-up). */
  stepUpUntil: Date | null;
  /** The key's operating account (a member's: the merchant's first account). */
  accountId: number;
  flash: Flash | null;
}

/**
 * The one-time message shown on the next page. A refusal of a form also carries its field errors
 * (field name → messages) and what was typed (`values`, secrets left out), for the form that
 * posts to `form` (the page shows them in that form only).
 */
export interface Flash {
  kind: 'ok' | 'error';
  text: string;
  fields?: Record<string, string[]>;
  values?: Record<string, string | string[]>;
  form?: string;
}

/** How long a step-up (a TOTP code typed again) lets sensitive actions through. */
export const STEP_UP_MS = 5 * 60_000;

const sha256 = (s: string) => createHash('sha256').update(s, 'utf8').digest('hex');

export function readCookie(req: FastifyRequest, name: string): string | undefined {
  const header = req.headers.cookie;
  if (!header) return undefined;
  for (const part of header.split(';')) {
    const eq = part.indexOf('=');
    if (eq > 0 && part.slice(0, eq).trim() === name) return part.slice(eq + 1).trim();
  }
  return undefined;
}

function cookie(ctx: AppContext, value: string, maxAgeSeconds: number): string {
  return `${SESSION_COOKIE}=${value}; Path=/portal; HttpOnly; SameSite=Strict; Max-Age=${maxAgeSeconds}${ctx.config.tls ? '; Secure' : ''}`;
}

/** A new session of an API key (`clientId`) or a member (`memberId`, `mfaPending` until the second factor). */
export async function createSession(
  ctx: AppContext,
  reply: FastifyReply,
  who: string | { memberId: number; mfaPending: boolean; stepUp?: boolean },
): Promise<void> {
  const token = randomBytes(32).toString('base64url');
  const now = ctx.wallClock.now();
  const member = typeof who === 'string' ? null : who;
  await ctx.db.query('DELETE FROM portal_sessions WHERE expires_at < $1', [now]);
  await ctx.db.query(
    `INSERT INTO portal_sessions (token_hash, client_id, member_id, mfa_pending, step_up_until, csrf_token, created_at, expires_at)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`,
    [
      sha256(token),
      member ? null : who,
      member?.memberId ?? null,
      member?.mfaPending ?? false,
      member?.stepUp ? new Date(now.getTime() + STEP_UP_MS) : null,
      randomBytes(32).toString('base64url'),
      now,
      new Date(now.getTime() + SESSION_TTL_MS),
    ],
  );
  void reply.header('set-cookie', cookie(ctx, token, SESSION_TTL_MS / 1000));
}

/**
 * The second factor passed (at sign-in or again for a sensitive action): the session is complete
 * and sensitive actions pass for STEP_UP_MS. The token changes (a new session row), so a token seen
 * before the second factor is worth nothing after it.
 */
export async function secondFactorPassed(ctx: AppContext, reply: FastifyReply, session: PortalSession): Promise<void> {
  if (!session.member) return;
  if (session.mfaPending) {
    await ctx.db.query('DELETE FROM portal_sessions WHERE token_hash = $1', [session.tokenHash]);
    await createSession(ctx, reply, { memberId: session.member.id, mfaPending: false, stepUp: true });
    return;
  }
  await ctx.db.query('UPDATE portal_sessions SET step_up_until = $2 WHERE token_hash = $1', [session.tokenHash, new Date(ctx.wallClock.now().getTime() + STEP_UP_MS)]);
}

/** Whether a sensitive action may run now without a new code. */
export function steppedUp(ctx: AppContext, session: PortalSession): boolean {
  return session.stepUpUntil !== null && session.stepUpUntil.getTime() > ctx.wallClock.now().getTime();
}

export async function endSession(ctx: AppContext, reply: FastifyReply, session: PortalSession | null): Promise<void> {
  if (session) await ctx.db.query('DELETE FROM portal_sessions WHERE token_hash = $1', [session.tokenHash]);
  void reply.header('set-cookie', cookie(ctx, '', 0));
}

export type SessionProblem = 'none' | 'expired' | 'key' | 'ip' | 'inactive' | 'member';

interface SessionRow {
  client_id: string | null;
  member_id: number | null;
  csrf_token: string;
  expires_at: Date;
  flash: string | null;
  mfa_pending: boolean;
  step_up_until: Date | null;
}

interface MemberAuthRow {
  id: number;
  merchant_id: number;
  email: string;
  name: string;
  role: Role;
  status: string;
  totp: boolean;
  require_totp: boolean;
  merchant_status: string;
  account_id: number | null;
  account_status: string | null;
}

/** The session of a request with its key or member re-checked, or why there is none. */
export async function loadSession(ctx: AppContext, req: FastifyRequest, clientIp: string): Promise<PortalSession | SessionProblem> {
  const token = readCookie(req, SESSION_COOKIE);
  if (!token || token.length > 100) return 'none';
  const tokenHash = sha256(token);
  const [row] = await ctx.db.query<SessionRow>(
    'SELECT client_id, member_id, csrf_token, expires_at, flash, mfa_pending, step_up_until FROM portal_sessions WHERE token_hash = $1',
    [tokenHash],
  );
  const now = ctx.wallClock.now();
  if (!row) return 'none';
  if (row.expires_at.getTime() <= now.getTime()) return 'expired';
  let base: Omit<PortalSession, 'tokenHash' | 'csrf' | 'flash' | 'mfaPending' | 'stepUpUntil'>;
  if (row.member_id !== null) {
    const [m] = await ctx.db.query<MemberAuthRow>(
      `SELECT mm.id, mm.merchant_id, mm.email, mm.name, mm.role, mm.status, mm.totp_secret IS NOT NULL AS totp,
              mer.require_totp, mer.status AS merchant_status, a.id AS account_id, a.status AS account_status
         FROM merchant_members mm
         JOIN merchants mer ON mer.id = mm.merchant_id
         LEFT JOIN LATERAL (SELECT id, status FROM accounts WHERE merchant_id = mm.merchant_id ORDER BY id LIMIT 1) a ON true
        WHERE mm.id = $1`,
      [row.member_id],
    );
    if (!m || m.status !== 'active') return 'member';
    if (m.account_id === null || m.account_status !== 'active' || m.merchant_status !== 'active') return 'inactive';
    base = {
      key: { client_id: null, merchant_id: Number(m.merchant_id), account_id: null, permissions: ROLE_CAPABILITIES[m.role] },
      member: { id: Number(m.id), email: m.email, name: m.name, role: m.role, totp: m.totp },
      requireTotp: m.require_totp,
      accountId: Number(m.account_id),
    };
  } else {
    const key = await findKeyForAuth(ctx.db, row.client_id!);
    if (!key || !key.active || (key.expires_at && key.expires_at.getTime() <= now.getTime())) return 'key';
    if (!whitelistAllows(key.ip_whitelist, clientIp)) return 'ip';
    if (key.operating_account_id === null || key.account_status !== 'active' || key.merchant_status !== 'active') return 'inactive';
    base = { key, member: null, requireTotp: false, accountId: key.operating_account_id };
  }
  let flash: PortalSession['flash'] = null;
  if (row.flash) {
    await ctx.db.query('UPDATE portal_sessions SET flash = NULL WHERE token_hash = $1', [tokenHash]);
    try {
      flash = JSON.parse(row.flash) as PortalSession['flash'];
    } catch {
      flash = null;
    }
  }
  return { ...base, tokenHash, csrf: row.csrf_token, flash, mfaPending: row.mfa_pending, stepUpUntil: row.step_up_until };
}

/** The most a flash keeps of what was typed (the form body is at most 64 KiB). */
const FLASH_VALUES_MAX = 32 * 1024;

/** A message shown once on the next page (after a redirect); with a form's field errors and values. */
export async function setFlash(sql: Sql, session: PortalSession, kind: 'ok' | 'error', text: string, form: Omit<Flash, 'kind' | 'text'> = {}): Promise<void> {
  const flash: Flash = { kind, text: text.slice(0, 2000), ...form };
  if (flash.values && JSON.stringify(flash.values).length > FLASH_VALUES_MAX) delete flash.values;
  await sql.query('UPDATE portal_sessions SET flash = $2 WHERE token_hash = $1', [session.tokenHash, JSON.stringify(flash)]);
}

export function csrfMatches(session: PortalSession, presented: unknown): boolean {
  if (typeof presented !== 'string') return false;
  const a = Buffer.from(presented);
  const b = Buffer.from(session.csrf);
  return a.length === b.length && timingSafeEqual(a, b);
}

/** Whether the session's key or role allows `permission` (checked on every page and action). */
export function can(session: PortalSession, permission: Capability): boolean {
  return session.key.permissions.includes(permission);
}
