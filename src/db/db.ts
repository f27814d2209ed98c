/**
 * The one database boundary. Two implementations run the same SQL text (PostgreSQL dialect, `$n`
 * placeholders): PGlite (embedded, in-process PostgreSQL) and a PostgreSQL server through a pool.
 *
 * Type mapping is the same on both: `bigint`/`int8` columns come back as JS numbers and throw if a
 * value leaves the safe-integer range (money never silently loses precision); `numeric` stays a
 * string; `timestamptz` is a Date.
 */
export type Row = Record<string, unknown>;

export interface Sql {
  /** Runs one parameterized statement and returns its rows. */
  query<R = Row>(text: string, params?: readonly unknown[]): Promise<R[]>;
  /** Runs a multi-statement script without parameters (migrations). */
  exec(script: string): Promise<void>;
}

export interface Database extends Sql {
  readonly dialect: 'pglite' | 'postgres';
  /**
   * Runs `fn` inside one transaction (READ COMMITTED). On PostgreSQL a serialization failure or a
   * deadlock (40001, 40P01) rolls back and runs `fn` again, up to 5 times, so `fn` must only touch
   * the database. Never call the outer Database from inside `fn`: on PGlite that waits forever.
   */
  transaction<T>(fn: (tx: Sql) => Promise<T>): Promise<T>;
  ping(): Promise<void>;
  close(): Promise<void>;
  /** Connection pool figures (PostgreSQL only), read by the metrics at scrape time. */
  poolStats?(): { total: number; idle: number; waiting: number };
}

const commitHooks = new WeakMap<Sql, (() => void)[]>();

/**
 * Runs `fn` after the transaction of `tx` has committed — never if it rolls back, fails at COMMIT
 * or is run again (40001/40P01: each attempt has its own handle). For state kept outside the
 * database that must only reflect what is durable (e.g. an idempotency answer).
 */
export function afterCommit(tx: Sql, fn: () => void): void {
  const hooks = commitHooks.get(tx);
  if (!hooks) throw new Error('afterCommit needs the handle of a transaction (Database.transaction)');
  hooks.push(fn);
}

/** For Database implementations: makes `tx` accept afterCommit; call the result after COMMIT. */
export function commitHooksFor(tx: Sql): () => void {
  const hooks: (() => void)[] = [];
  commitHooks.set(tx, hooks);
  return () => {
    for (const hook of hooks) hook();
  };
}

/** PostgreSQL SQLSTATE of a driver error, if it has one. */
export function sqlState(err: unknown): string | undefined {
  if (typeof err === 'object' && err !== null && 'code' in err) {
    const code = (err as { code: unknown }).code;
    if (typeof code === 'string' && /^[0-9A-Z]{5}$/.test(code)) return code;
  }
  return undefined;
}

/** Name of the violated constraint (UNIQUE/CHECK), if the driver reports it. */
export function constraintName(err: unknown): string | undefined {
  if (typeof err === 'object' && err !== null && 'constraint' in err) {
    const c = (err as { constraint: unknown }).constraint;
    if (typeof c === 'string') return c;
  }
  return undefined;
}

export const UNIQUE_VIOLATION = '23505';
export const CHECK_VIOLATION = '23514';
export const RETRYABLE_STATES = new Set(['40001', '40P01']);

/** int8 parser shared by both drivers. */
export function parseInt8(text: string): number {
  const value = Number(text);
  if (!Number.isSafeInteger(value)) throw new RangeError(`int8 value ${text} is outside the safe integer range`);
  return value;
}

export const INT8_OID = 20;
