import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { findKeyForAuth, type KeyWithAccount } from '../auth/apiKeys.js';
import { whitelistAllows } from '../auth/ipWhitelist.js';
import type { Permission } from '../auth/permissions.js';
import type { AppContext } from '../context.js';
import type { Sql } from '../db/db.js';

/**
 * Portal sessions. Sign-in checks the API key exactly as the merchant API does (credentials, IP
 * whitelist, account status); the cookie then carries a random 256-bit token (stored as its
 * SHA-256). Every later request re-reads the key and applies the same checks and the key's
 * permissions, so revoking, expiring or re-whitelisting the key takes effect at once.
 */
export const SESSION_COOKIE = 'pixgate_portal';
export const SESSION_TTL_MS = 8 * 3600_000;

export interface PortalSession {
  tokenHash: string;
  csrf: string;
  key: KeyWithAccount;
  /** The key's operating account. */
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

export async function createSession(ctx: AppContext, reply: FastifyReply, clientId: string): Promise<void> {
  const token = randomBytes(32).toString('base64url');
  const now = ctx.clock.now();
  await ctx.db.query('DELETE FROM portal_sessions WHERE expires_at < $1', [now]);
  await ctx.db.query(
    `INSERT INTO portal_sessions (token_hash, client_id, csrf_token, created_at, expires_at) VALUES ($1, $2, $3, $4, $5)`,
    [sha256(token), clientId, randomBytes(32).toString('base64url'), now, new Date(now.getTime() + SESSION_TTL_MS)],
  );
  void reply.header('set-cookie', cookie(ctx, token, SESSION_TTL_MS / 1000));
}

export async function endSession(ctx: AppContext, reply: FastifyReply, session: PortalSession | null): Promise<void> {
  if (session) await ctx.db.query('DELETE FROM portal_sessions WHERE token_hash = $1', [session.tokenHash]);
  void reply.header('set-cookie', cookie(ctx, '', 0));
}

export type SessionProblem = 'none' | 'expired' | 'key' | 'ip' | 'inactive';

/** The session of a request with its key re-checked, or why there is none. */
export async function loadSession(ctx: AppContext, req: FastifyRequest, clientIp: string): Promise<PortalSession | SessionProblem> {
  const token = readCookie(req, SESSION_COOKIE);
  if (!token || token.length > 100) return 'none';
  const tokenHash = sha256(token);
  const [row] = await ctx.db.query<{ client_id: string; csrf_token: string; expires_at: Date; flash: string | null }>(
    'SELECT client_id, csrf_token, expires_at, flash FROM portal_sessions WHERE token_hash = $1',
    [tokenHash],
  );
  const now = ctx.clock.now();
  if (!row) return 'none';
  if (row.expires_at.getTime() <= now.getTime()) return 'expired';
  const key = await findKeyForAuth(ctx.db, row.client_id);
  if (!key || !key.active || (key.expires_at && key.expires_at.getTime() <= now.getTime())) return 'key';
  if (!whitelistAllows(key.ip_whitelist, clientIp)) return 'ip';
  if (key.operating_account_id === null || key.account_status !== 'active' || key.merchant_status !== 'active') return 'inactive';
  let flash: PortalSession['flash'] = null;
  if (row.flash) {
    await ctx.db.query('UPDATE portal_sessions SET flash = NULL WHERE token_hash = $1', [tokenHash]);
    try {
      flash = JSON.parse(row.flash) as PortalSession['flash'];
    } catch {
      flash = null;
    }
  }
  return { tokenHash, csrf: row.csrf_token, key, accountId: key.operating_account_id, flash };
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

export function can(session: PortalSession, permission: Permission): boolean {
  return session.key.permissions.includes(permission);
}
