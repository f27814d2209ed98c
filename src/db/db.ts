import { AsyncLocalStorage } from 'node:async_hooks';

/**
 * The one database boundary. Two implementations run the same SQL text (PostgreSQL dialect, `$n`
 * placeholders): PGlite (embedded, in-process PostgreSQL) and a PostgreSQL server through a pool.
 *
 * Type mapping is the same on both: `bigint`/`int8` columns come back as JS numbers and throw if a
 * value leaves the safe-integer range (money never silently loses precision); `numeric` stays a
 * string; `timestamptz` is a Date.
 */
export type Row = Record<string, unknown>;

/**
 * A statement whose text starts with this comment is planned on each run, never prepared (the
 * PostgreSQL adapter prepares parameterized statements, and PostgreSQL then keeps a generic
 * plan per connection). For statements over queue tables that swing between empty and busy: a
 * generic plan made while such a table was analyzed empty joined it by sequential scans and
 * nested loops, and stayed while it filled (docs/decisions.md, "Query plans on young tables").
 */
export const PLAN_EACH_RUN = '/* plan each run */ ';

/**
 * A CTE for a statement whose own commit need not wait for the disk: `set_config(…, true)` turns
 * synchronous_commit off for the statement's transaction only (nothing reaches the session, nor —
 * behind a pooler — another client). Only for writes whose loss in a crash of the database leaves
 * a consistent state: the WAL is one sequence, a crash loses a suffix of it, and any later
 * synchronous commit (of any connection) makes the earlier asynchronous ones durable. The
 * simulated rail's own bookkeeping uses it (docs/decisions.md, "The simulated rail's commits").
 * A CTE nobody reads does not run: the statement must read `relaxed_commit` (a join with its one
 * row, or a scalar subquery in its WHERE).
 */
export const RELAXED_COMMIT = `relaxed_commit AS MATERIALIZED (SELECT set_config('synchronous_commit', 'off', true) AS relaxed)`;

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
  /**
   * Subscribes to the notification channel `name` of this database's schema (see `notify`). The
   * handler gets each payload; it gets `null` when notifications may have been missed (the
   * listening connection was lost and is back), so a cache must flush and a worker must look for
   * work. Handlers run after the sending transaction has committed. Resolves once listening;
   * the result unsubscribes.
   */
  listen(name: string, handler: (payload: string | null) => void): Promise<() => Promise<void>>;
  /**
   * Statements sent so far by this database and its views, by source (`counted`): every query,
   * every statement of a transaction including BEGIN and COMMIT/ROLLBACK (a retried transaction
   * counts again), `exec` and `ping` as one each, and the LISTEN bookkeeping under `listen`. Read
   * by the metrics at scrape time (`pixgate_db_statements_total`).
   */
  statements(): Readonly<Record<string, number>>;
  /**
   * The same database (same pool, same connection, same listeners) whose statements count under
   * `source` (`request` for the database itself; server.ts gives `background` to the workers and
   * `rail` to the simulated rail). Closing a view closes the database.
   */
  counted(source: string): Database;
}

/**
 * Statement counts of one database, shared by its counted views: one cell per source, so counting
 * a statement is one property increment.
 */
export class StatementCounts {
  private readonly cells = new Map<string, { n: number }>();

  cell(source: string): { n: number } {
    if (!/^[a-z_]+$/.test(source)) throw new Error(`invalid statement source: ${source}`);
    let cell = this.cells.get(source);
    if (!cell) this.cells.set(source, (cell = { n: 0 }));
    return cell;
  }

  snapshot(): Record<string, number> {
    return Object.fromEntries([...this.cells].map(([source, cell]) => [source, cell.n]));
  }
}

/**
 * Notification channels are per schema: `<current_schema()>__<name>`. Tests (and operators) run
 * several pixgate databases as schemas of one PostgreSQL database, and LISTEN/NOTIFY channels are
 * database-wide, so the schema keeps them apart.
 */
export const channelSql = (nameParam: string) => `current_schema() || '__' || ${nameParam}`;
export const CHANNEL_SQL = channelSql('$1');

/** The full channel name of `name` in `schema` (names are lower-case identifiers: [a-z0-9_]). */
export function channelName(schema: string, name: string): string {
  if (!/^[a-z0-9_]+$/.test(name)) throw new Error(`invalid notification channel name: ${name}`);
  return `${schema}__${name}`;
}

/**
 * Sends `payload` on the channel `name` of the current schema. Inside a transaction it is
 * delivered when the transaction commits, and not at all if it rolls back (PostgreSQL semantics),
 * so a wake-up or an invalidation never runs ahead of the data it is about. Payloads are short
 * (PostgreSQL caps them at 8000 bytes); identical payloads in one transaction are delivered once.
 */
export async function notify(sql: Sql, name: string, payload = ''): Promise<void> {
  await sql.query(`SELECT pg_notify(${CHANNEL_SQL}, $2)`, [name, payload]);
}

const localWakes = new WeakMap<Sql, (name: string) => void>();

/**
 * Wakes this process's listeners of `name` on the database of `sql` (handler payload `''`) once the
 * transaction of `sql` commits — never if it rolls back; at once when `sql` is not a transaction
 * (its statements have committed). No statement, no round trip and no PostgreSQL notification: the
 * cheap wake-up for hot paths (a NOTIFY makes every notifying commit of the cluster wait for one
 * global lock, which would serialize the money path). Other processes are not told; they rely on a
 * `notify` sent elsewhere or on their safety-net poll.
 */
export function wakeLocal(sql: Sql, name: string): void {
  const dispatch = localWakes.get(sql);
  if (!dispatch) return; // a handle no driver made (a test's wrapper): the safety net finds the work
  const hooks = commitHooks.get(sql);
  if (hooks) hooks.push(() => dispatch(name));
  else dispatch(name);
}

/** For Database implementations: `wakeLocal(sql, name)` calls `dispatch(name)`. */
export function localWakesFor(sql: Sql, dispatch: (name: string) => void): void {
  localWakes.set(sql, dispatch);
}

/** For views of a Database (src/db/limit.ts): `wakeLocal(view, name)` wakes what `wakeLocal(db, name)` does. */
export function shareLocalWakes(db: Sql, view: Sql): void {
  const dispatch = localWakes.get(db);
  if (dispatch) localWakes.set(view, dispatch);
}

/** Bookkeeping of listeners shared by both drivers: channel name -> handlers. */
export class ListenerSet {
  private readonly handlers = new Map<string, Set<(payload: string | null) => void>>();

  add(channel: string, handler: (payload: string | null) => void): { first: boolean; remove: () => boolean } {
    let set = this.handlers.get(channel);
    const first = set === undefined;
    if (!set) this.handlers.set(channel, (set = new Set()));
    set.add(handler);
    return {
      first,
      remove: () => {
        set!.delete(handler);
        if (set!.size > 0) return false;
        this.handlers.delete(channel);
        return true;
      },
    };
  }

  channels(): string[] {
    return [...this.handlers.keys()];
  }

  dispatch(channel: string, payload: string | null): void {
    for (const handler of this.handlers.get(channel) ?? []) {
      try {
        handler(payload);
      } catch {
        // a handler's failure is its own; the others still run
      }
    }
  }

  dispatchAll(payload: null): void {
    for (const channel of this.channels()) this.dispatch(channel, payload);
  }
}

/** A channel name as an SQL identifier (LISTEN takes no parameters). */
export function quoteChannel(channel: string): string {
  return `"${channel.replace(/"/g, '""')}"`;
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

/**
 * Whether a statement's error proves that nothing of it was written: PostgreSQL raised it while
 * running the statement, before any commit — so the statement's writes (and, outside a
 * transaction, its implicit transaction) were rolled back and it may be decided and written again.
 * Having a SQLSTATE is not enough: 57P01/57P02 (the server shutting down), 08xxx (the connection),
 * XX000 (internal) and others can be reported after an autocommit statement committed. An
 * explicit allow-list:
 *   21, 22, 23   cardinality, data and integrity violations (deferred constraints included: they
 *                fail the COMMIT, which then rolls back)
 *   42           syntax or access: never ran
 *   P0           raised by a PL/pgSQL function of the statement (statement_assert, the triggers)
 *   40001, 40P01 serialization failure, deadlock: the transaction was rolled back
 *   55P03        lock_timeout (or NOWAIT): raised while waiting, before writing
 *   57014        query_canceled (statement_timeout): only `inTransaction` — inside an explicit
 *                transaction nothing commits before COMMIT; an autocommit statement may be
 *                cancelled while its commit completes
 * Anything else — no SQLSTATE, or one not listed — may follow a commit: the caller must not write
 * again as if nothing happened.
 */
export function provesRollback(err: unknown, inTransaction: boolean): boolean {
  const state = sqlState(err);
  if (state === undefined) return false;
  if (ROLLBACK_CLASSES.has(state.slice(0, 2)) || ROLLBACK_STATES.has(state)) return true;
  return inTransaction && state === QUERY_CANCELED;
}

const ROLLBACK_CLASSES = new Set(['21', '22', '23', '42', 'P0']);
// 25006 (read_only_sql_transaction): a read-only server wrote nothing.
const READ_ONLY_SERVER = '25006';
const ROLLBACK_STATES = new Set(['40001', '40P01', '55P03', READ_ONLY_SERVER]);
const QUERY_CANCELED = '57014';

export const UNIQUE_VIOLATION = '23505';
export const LOCK_NOT_AVAILABLE = '55P03';
export const CHECK_VIOLATION = '23514';
export const RETRYABLE_STATES = new Set(['40001', '40P01']);

/** int8 parser shared by both drivers. */
export function parseInt8(text: string): number {
  const value = Number(text);
  if (!Number.isSafeInteger(value)) throw new RangeError(`int8 value ${text} is outside the safe integer range`);
  return value;
}

export const INT8_OID = 20;

/**
 * A COMMIT whose outcome is not known: its connection was lost or its answer did not come, or it
 * came with a WARNING (a synchronous standby's confirmation given up: committed on the primary,
 * perhaps not on the standby that a failover would promote). Never retried, never answered 2xx:
 * the HTTP edge answers 503 with Retry-After (it counts as unavailable), and the client's retry
 * under the same Idempotency-Key finds what committed, if anything. `cause`: the driver's error or
 * the notice.
 */
export class CommitOutcomeUnknown extends Error {
  override name = 'CommitOutcomeUnknown';
  constructor(override readonly cause: unknown) {
    super(`the outcome of COMMIT is unknown: ${(cause as { message?: unknown })?.message ?? String(cause)}`);
  }
}

/** Node socket errors that mean the database server could not be reached or the connection died. */
const CONNECTION_ERROR_CODES = new Set(['ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EPIPE', 'EHOSTUNREACH', 'ENETUNREACH', 'ENOTFOUND', 'EAI_AGAIN', 'ECONNABORTED']);

/** node-postgres and pg-pool messages of a lost, refused or timed-out connection (they carry no code). */
const CONNECTION_ERROR_MESSAGES = [
  'Connection terminated',
  'not queryable',
  'timeout exceeded when trying to connect',
  'Query read timeout',
  'Cannot use a pool after calling end',
];

/**
 * Whether `err` says the database is unavailable — not that the statement was wrong: the server
 * could not be reached or dropped the connection (socket errors, node-postgres' "Connection
 * terminated…", a pool that found no connection in time, a statement whose answer never came:
 * "Query read timeout"), or refused to serve it (class 08
 * connection exceptions; 57P01 admin shutdown, 57P02 crash shutdown, 57P03 cannot connect now;
 * 53300 too many connections). The one place this is decided: the HTTP edge answers these 503
 * with Retry-After (src/http/errorHandler.ts), never 4xx or 500 with the driver's text. It says
 * nothing about whether a write that was in flight committed (see RETRYABLE_STATES and
 * docs/decisions.md): only that the answer is "try again later".
 */
export function isDatabaseUnavailable(err: unknown, depth = 0): boolean {
  if (typeof err !== 'object' || err === null || depth > 3) return false;
  if (err instanceof CommitOutcomeUnknown) return true;
  const code = (err as { code?: unknown }).code;
  if (typeof code === 'string' && CONNECTION_ERROR_CODES.has(code)) return true; // before sqlState: EPIPE has five letters
  const state = sqlState(err);
  // 25006: a write reached a server in read-only mode (a standby, or the old primary behind a
  // pooler connection opened before a failover): the primary is not here right now.
  if (state !== undefined) return state.startsWith('08') || state === '57P01' || state === '57P02' || state === '57P03' || state === '53300' || state === READ_ONLY_SERVER;
  const message = (err as { message?: unknown }).message;
  if (typeof message === 'string' && CONNECTION_ERROR_MESSAGES.some((m) => message.includes(m))) return true;
  // Node's connect over several addresses (AggregateError) and wrapped errors.
  const inner = (err as { errors?: unknown }).errors;
  if (Array.isArray(inner) && inner.length > 0 && inner.every((e) => isDatabaseUnavailable(e, depth + 1))) return true;
  return isDatabaseUnavailable((err as { cause?: unknown }).cause, depth + 1);
}

/**
 * A write that must commit with the work of one async context — in its first transaction, never
 * after it: the operator audit row (src/admin/auditLog.ts) joins the first transaction an operator
 * write runs, so the operation cannot commit without it. While a companion of the current async
 * context is `waiting`, both drivers run `write(tx)` at the start of the next transaction (a
 * statement outside a transaction becomes one), mark it `in_flight`, then `committed` once that
 * transaction has committed, or `waiting` again if it rolled back (a retried transaction writes it
 * again). It joins nothing once `committed` or ended.
 */
export interface TransactionCompanion {
  state: 'waiting' | 'in_flight' | 'committed' | 'ended';
  write(tx: Sql): Promise<void>;
}

const companions = new AsyncLocalStorage<TransactionCompanion>();
let companionsInScope = 0;

/**
 * Runs `fn` (and every async continuation it starts) with `companion`; end the scope with
 * `endCompanion`. AsyncLocalStorage costs every promise of the process a hook while enabled, so it is
 * enabled only while a companion is in scope (operator writes are rare) and disabled after the last.
 */
export function runWithCompanion<T>(companion: TransactionCompanion, fn: () => T): T {
  companionsInScope++;
  return companions.run(companion, fn);
}

/** Ends a companion's scope (once): it joins no transaction any more. */
export function endCompanion(companion: TransactionCompanion): void {
  if (companion.state === 'ended') return;
  companion.state = 'ended';
  if (--companionsInScope === 0) companions.disable();
}

/** For Database implementations: the companion waiting to join a transaction of this context, if any. */
export function waitingCompanion(): TransactionCompanion | undefined {
  const companion = companionsInScope > 0 ? companions.getStore() : undefined;
  return companion?.state === 'waiting' ? companion : undefined;
}

/** For Database implementations: takes the waiting companion of this context for a transaction. */
export function takeCompanion(): TransactionCompanion | undefined {
  const companion = waitingCompanion();
  if (companion) companion.state = 'in_flight';
  return companion;
}

/**
 * For Database implementations: the transaction that took `companion` committed (no `err`), or
 * failed for good (`err`, thrown from here: `never`) and the companion waits for the next one.
 */
export function settleCompanion(companion: TransactionCompanion | undefined): void;
export function settleCompanion(companion: TransactionCompanion | undefined, err: unknown): never;
export function settleCompanion(companion: TransactionCompanion | undefined, err?: unknown): void {
  if (companion?.state === 'in_flight') companion.state = arguments.length > 1 ? 'waiting' : 'committed';
  if (arguments.length > 1) throw err;
}
