import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { findOperator, type OperatorRow } from '../auth/operators.js';
import type { AppContext } from '../context.js';
import type { Sql } from '../db/db.js';
import { readCookie } from '../portal/session.js';

/**
 * Console sessions (docs/console.md): a random 256-bit id in an HttpOnly, SameSite=Strict cookie
 * scoped to /console, stored as its SHA-256; a CSRF token per session, sent in every form and
 * compared in constant time. Every request re-reads the operator: a disabled operator is out at once.
 */
export const CONSOLE_COOKIE = 'pixgate_console';
export const CONSOLE_SESSION_TTL_MS = 8 * 3600_000;

export interface ConsoleSession {
  tokenHash: string;
  csrf: string;
  operator: OperatorRow;
  flash: { kind: 'ok' | 'error'; text: string } | null;
}

const sha256 = (s: string) => createHash('sha256').update(s, 'utf8').digest('hex');

function cookie(ctx: AppContext, value: string, maxAge: number): string {
  return `${CONSOLE_COOKIE}=${value}; Path=/console; HttpOnly; SameSite=Strict; Max-Age=${maxAge}${ctx.config.tls ? '; Secure' : ''}`;
}

export async function openConsoleSession(ctx: AppContext, reply: FastifyReply, operatorId: number): Promise<void> {
  const token = randomBytes(32).toString('base64url');
  const now = ctx.wallClock.now();
  await ctx.db.query('DELETE FROM console_sessions WHERE expires_at < $1', [now]);
  await ctx.db.query(
    'INSERT INTO console_sessions (token_hash, operator_id, csrf_token, created_at, expires_at) VALUES ($1, $2, $3, $4, $5)',
    [sha256(token), operatorId, randomBytes(32).toString('base64url'), now, new Date(now.getTime() + CONSOLE_SESSION_TTL_MS)],
  );
  void reply.header('set-cookie', cookie(ctx, token, CONSOLE_SESSION_TTL_MS / 1000));
}

export async function closeConsoleSession(ctx: AppContext, reply: FastifyReply, s: ConsoleSession | null): Promise<void> {
  if (s) await ctx.db.query('DELETE FROM console_sessions WHERE token_hash = $1', [s.tokenHash]);
  void reply.header('set-cookie', cookie(ctx, '', 0));
}

export async function loadConsoleSession(ctx: AppContext, req: FastifyRequest): Promise<ConsoleSession | null> {
  const token = readCookie(req, CONSOLE_COOKIE);
  if (!token || token.length > 100) return null;
  const tokenHash = sha256(token);
  const [row] = await ctx.db.query<{ operator_id: number; csrf_token: string; expires_at: Date; flash: string | null }>(
    'SELECT operator_id, csrf_token, expires_at, flash FROM console_sessions WHERE token_hash = $1',
    [tokenHash],
  );
  if (!row || row.expires_at.getTime() <= ctx.wallClock.now().getTime()) return null;
  const operator = await findOperator(ctx.db, Number(row.operator_id));
  if (!operator || operator.status !== 'active' || !operator.totp_enabled) return null;
  let flash: ConsoleSession['flash'] = null;
  if (row.flash) {
    await ctx.db.query('UPDATE console_sessions SET flash = NULL WHERE token_hash = $1', [tokenHash]);
    try {
      flash = JSON.parse(row.flash) as ConsoleSession['flash'];
    } catch {
      flash = null;
    }
  }
  return { tokenHash, csrf: row.csrf_token, operator, flash };
}

export async function setConsoleFlash(sql: Sql, s: ConsoleSession, kind: 'ok' | 'error', text: string): Promise<void> {
  await sql.query('UPDATE console_sessions SET flash = $2 WHERE token_hash = $1', [s.tokenHash, JSON.stringify({ kind, text: text.slice(0, 2000) })]);
}

export function consoleCsrfMatches(s: ConsoleSession, presented: unknown): boolean {
  if (typeof presented !== 'string') return false;
  const a = Buffer.from(presented);
  const b = Buffer.from(s.csrf);
  return a.length === b.length && timingSafeEqual(a, b);
}
