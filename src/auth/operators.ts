import type { Database, Sql } from '../db/db.js';
import { UNIQUE_VIOLATION, sqlState } from '../db/db.js';
import { DomainError } from '../errors/catalog.js';
import { decoyHash, hashPassword, passwordProblem, verifyPassword } from './passwords.js';
import { newTotpSecret, verifyTotp } from './totp.js';

/**
 * The operators of the console (docs/console.md): the people who run this pixgate, with their own
 * accounts — username, scrypt password (src/auth/passwords.ts), a TOTP second factor every operator
 * has (src/auth/totp.ts) and one role. What each role may do is the table below; the console checks
 * it on every page and action, server-side.
 */
export const OPERATOR_ROLES = ['owner', 'operations', 'support', 'compliance'] as const;
export type OperatorRole = (typeof OPERATOR_ROLES)[number];

export const CONSOLE_CAPABILITIES = ['read', 'deposit', 'limits', 'keys', 'med:act', 'webhooks:act', 'audit:read', 'operators:manage', 'rail:simulate'] as const;
export type ConsoleCapability = (typeof CONSOLE_CAPABILITIES)[number];

/** docs/console.md "Roles": the one table the console checks. */
export const OPERATOR_CAPABILITIES: Readonly<Record<OperatorRole, readonly ConsoleCapability[]>> = {
  owner: ['read', 'deposit', 'limits', 'keys', 'med:act', 'webhooks:act', 'audit:read', 'operators:manage', 'rail:simulate'],
  operations: ['read', 'deposit', 'limits', 'keys', 'med:act', 'webhooks:act', 'rail:simulate'],
  support: ['read', 'webhooks:act'],
  compliance: ['read', 'audit:read'],
};

export function isOperatorRole(v: unknown): v is OperatorRole {
  return typeof v === 'string' && (OPERATOR_ROLES as readonly string[]).includes(v);
}

export function operatorMay(role: OperatorRole, capability: ConsoleCapability): boolean {
  return OPERATOR_CAPABILITIES[role].includes(capability);
}

export interface OperatorRow {
  id: number;
  username: string;
  password_hash: string;
  role: OperatorRole;
  totp_secret: string;
  totp_enabled: boolean;
  totp_last_step: number | null;
  status: 'active' | 'disabled';
  created_by: string;
  created_at: Date;
}

const USERNAME = /^[a-z0-9][a-z0-9._-]{1,39}$/;

export async function countOperators(sql: Sql): Promise<number> {
  const [r] = await sql.query<{ n: number }>('SELECT count(*)::int AS n FROM console_operators');
  return Number(r!.n);
}

export async function findOperator(sql: Sql, id: number): Promise<OperatorRow | undefined> {
  const [r] = await sql.query<OperatorRow>('SELECT * FROM console_operators WHERE id = $1', [id]);
  return r;
}

export async function listOperators(sql: Sql, limit = 500, offset = 0): Promise<OperatorRow[]> {
  return sql.query<OperatorRow>('SELECT * FROM console_operators ORDER BY id LIMIT $1 OFFSET $2', [Math.min(limit, 10_000), offset]);
}

/**
 * Creates an operator with a fresh TOTP secret (shown once to whoever created it, to hand over).
 * `onlyFirst`: the bootstrap — refused once any operator exists (checked under a lock, so two
 * bootstraps at once make one owner).
 */
export async function createOperator(
  db: Database,
  input: { username: string; password: string; role: OperatorRole; createdBy: string; onlyFirst?: boolean },
): Promise<{ operator: OperatorRow; totpSecret: string }> {
  const fields: Record<string, string[]> = Object.create(null);
  if (!USERNAME.test(input.username)) fields.username = ['2 to 40 characters: lower-case letters, digits, dot, dash, underscore'];
  const pw = passwordProblem(input.password);
  if (pw) fields.password = [pw];
  if (Object.keys(fields).length) throw new DomainError('bad_request', { fields });
  const hash = await hashPassword(input.password);
  const secret = newTotpSecret();
  try {
    const operator = await db.transaction(async (tx) => {
      if (input.onlyFirst) {
        await tx.query('LOCK TABLE console_operators IN SHARE ROW EXCLUSIVE MODE');
        if ((await countOperators(tx)) > 0) throw new DomainError('conflict', { message: 'The first owner exists already: sign in instead' });
      }
      const [row] = await tx.query<OperatorRow>(
        `INSERT INTO console_operators (username, password_hash, role, totp_secret, created_by) VALUES ($1, $2, $3, $4, $5) RETURNING *`,
        [input.username, hash, input.role, secret, input.createdBy],
      );
      return row!;
    });
    return { operator, totpSecret: secret };
  } catch (err) {
    if (sqlState(err) === UNIQUE_VIOLATION) throw new DomainError('conflict', { message: 'That username is taken' });
    throw err;
  }
}

/** The active operator whose username and password these are, or undefined (same work either way). */
export async function checkOperatorPassword(sql: Sql, username: string, password: string): Promise<OperatorRow | undefined> {
  const [row] = username.length <= 40 ? await sql.query<OperatorRow>(`SELECT * FROM console_operators WHERE username = $1`, [username]) : [];
  const ok = await verifyPassword(password, row?.password_hash ?? (await decoyHash()));
  return ok && row && row.status === 'active' ? row : undefined;
}

/**
 * Checks a TOTP code of the operator and, when valid, stores its step (a code works once) and marks
 * the factor confirmed. The step is compared and written in one statement, so two sign-ins with the
 * same code cannot both pass.
 */
export async function checkOperatorTotp(sql: Sql, operator: OperatorRow, code: string, now: Date): Promise<boolean> {
  const step = verifyTotp(operator.totp_secret, code, now, operator.totp_last_step === null ? null : Number(operator.totp_last_step));
  if (step === null) return false;
  const rows = await sql.query(
    `UPDATE console_operators SET totp_last_step = $2, totp_enabled = true
      WHERE id = $1 AND (totp_last_step IS NULL OR totp_last_step < $2) RETURNING id`,
    [operator.id, step],
  );
  return rows.length === 1;
}

/**
 * Disables an operator and ends their sessions in one transaction. An owner cannot disable
 * themself, and the last active owner stays (someone must be able to manage operators).
 */
export async function disableOperator(db: Database, id: number, byOperatorId: number): Promise<OperatorRow> {
  if (id === byOperatorId) throw new DomainError('conflict', { message: 'You cannot disable yourself' });
  return db.transaction(async (tx) => {
    await tx.query('LOCK TABLE console_operators IN SHARE ROW EXCLUSIVE MODE');
    const [target] = await tx.query<OperatorRow>('SELECT * FROM console_operators WHERE id = $1', [id]);
    if (!target) throw new DomainError('not_found', { message: 'operator not found' });
    if (target.role === 'owner') {
      const [r] = await tx.query<{ n: number }>(`SELECT count(*)::int AS n FROM console_operators WHERE role = 'owner' AND status = 'active'`);
      if (Number(r!.n) <= 1) throw new DomainError('conflict', { message: 'The last active owner cannot be disabled' });
    }
    const [row] = await tx.query<OperatorRow>(`UPDATE console_operators SET status = 'disabled' WHERE id = $1 RETURNING *`, [id]);
    await tx.query('DELETE FROM console_sessions WHERE operator_id = $1', [id]);
    return row!;
  });
}
