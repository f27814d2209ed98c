import { createHash } from 'node:crypto';
import pg from 'pg';
import { hostList } from './hosts.js';
import { CommitOutcomeUnknown, provesRollback, channelName, PLAN_EACH_RUN, commitHooksFor, settleCompanion, takeCompanion, waitingCompanion, INT8_OID, ListenerSet, parseInt8, localWakesFor, quoteChannel, RETRYABLE_STATES, sqlState, StatementCounts, type Database, type Sql } from './db.js';

/**
 * How `url` reaches PostgreSQL (DATABASE_POOLER): `none` — straight, or through a balancer that
 * hands out whole connections; `session` — a pooler in session mode (pgbouncer): no startup
 * parameters, since pgbouncer refuses those it does not know; `transaction` — a pooler in
 * transaction mode: moreover no named prepared statements (pgbouncer 1.18 runs each transaction on
 * any server connection, where the name may not exist or may already exist) and no LISTEN (a
 * separate `listenUrl` straight to the primary). In both pooled modes the timeouts come from the
 * role's settings (`ALTER ROLE … SET statement_timeout …`; `pooledSettingsMismatch` checks them).
 */
export type Pooler = 'none' | 'session' | 'transaction';

export interface PostgresOptions {
  /** libpq-style URL; may name several hosts (`h1:5432,h2:5432`, see hosts.ts). */
  url: string;
  pooler?: Pooler;
  /** The LISTEN connection's URL (DATABASE_LISTEN_URL): straight to the primary; default `url`. */
  listenUrl?: string;
  /** Pool size per process. */
  max?: number;
  /**
   * Sets `search_path` on every connection (tests give each test its own schema) through the
   * startup parameter `options`: without a pooler only (behind one, the role's search_path).
   */
  schema?: string;
  applicationName?: string;
  /** Per-connection limits (PostgreSQL settings sent at connect); unset = the server's default. */
  statementTimeoutMs?: number;
  lockTimeoutMs?: number;
  idleInTransactionTimeoutMs?: number;
}

const types = {
  getTypeParser(oid: number, format?: 'text' | 'binary') {
    if (oid === INT8_OID) return parseInt8;
    return pg.types.getTypeParser(oid, format);
  },
} as pg.CustomTypesConfig;

const MAX_ATTEMPTS = 5;

/** How long past statement_timeout a statement waits for the server's answer before it gives up. */
export const QUERY_TIMEOUT_MARGIN_MS = 2_000;

/**
 * Parameterized statements run as named prepared statements: each connection parses and plans one
 * once, then only binds and executes it — planning a CTE of five data-modifying parts cost more
 * than running it, and planning short statements was most of what some cost PostgreSQL (the
 * settlement's read of its records: 76 of 164 ms in `bench:profile`, when only statements of 400
 * characters or more were prepared; 6 of 94 after). Named by a digest of the text, so one text
 * is one statement. Not prepared: a statement without parameters, one marked PLAN_EACH_RUN, and
 * any text past the first `MAX_PREPARED_TEXTS` this process has seen — so that texts built at run
 * time can never grow every connection's prepared statements without bound.
 */
export const MAX_PREPARED_TEXTS = 2000;
const preparedNames = new Map<string, string>();
export function preparedName(text: string, names: Map<string, string> = preparedNames, max = MAX_PREPARED_TEXTS): string | undefined {
  let name = names.get(text);
  if (!name) {
    if (names.size >= max) return undefined;
    name = `px_${createHash('sha1').update(text).digest('hex').slice(0, 24)}`;
    names.set(text, name);
  }
  return name;
}

/**
 * Every connection cancels a statement running past statement_timeout (57014), gives up a lock
 * wait past lock_timeout (55P03) and is closed by the server when it sits idle inside a
 * transaction past idle_in_transaction_session_timeout (25P03). Sent as startup parameters when
 * nothing stands between pixgate and PostgreSQL; behind a pooler they are the role's settings.
 */
function timeoutParameters(options: PostgresOptions): pg.PoolConfig {
  return {
    ...(options.statementTimeoutMs !== undefined ? { statement_timeout: options.statementTimeoutMs } : {}),
    ...(options.lockTimeoutMs !== undefined ? { lock_timeout: options.lockTimeoutMs } : {}),
    ...(options.idleInTransactionTimeoutMs !== undefined ? { idle_in_transaction_session_timeout: options.idleInTransactionTimeoutMs } : {}),
    ...(options.schema ? { options: `-c search_path=${options.schema}` } : {}),
  };
}

/**
 * The settings a pooled connection has (read through the pooler: the role's and database's
 * settings, `ALTER ROLE … SET`) that differ from what the configuration asks for; empty when all
 * match, each as "<setting> is <value>, the configuration wants <n>ms".
 */
export async function pooledSettingsMismatch(db: Sql, expected: Pick<PostgresOptions, 'statementTimeoutMs' | 'lockTimeoutMs' | 'idleInTransactionTimeoutMs'>): Promise<string[]> {
  const wanted: [string, number | undefined][] = [
    ['statement_timeout', expected.statementTimeoutMs],
    ['lock_timeout', expected.lockTimeoutMs],
    ['idle_in_transaction_session_timeout', expected.idleInTransactionTimeoutMs],
  ];
  const [row] = await db.query<Record<string, string>>(
    `SELECT current_setting('statement_timeout') AS statement_timeout, current_setting('lock_timeout') AS lock_timeout,
            current_setting('idle_in_transaction_session_timeout') AS idle_in_transaction_session_timeout,
            (SELECT setting FROM pg_settings WHERE name = 'statement_timeout') AS statement_timeout_ms,
            (SELECT setting FROM pg_settings WHERE name = 'lock_timeout') AS lock_timeout_ms,
            (SELECT setting FROM pg_settings WHERE name = 'idle_in_transaction_session_timeout') AS idle_in_transaction_session_timeout_ms`,
  );
  return wanted
    .filter(([name, ms]) => ms !== undefined && Number(row![`${name}_ms`]) !== ms)
    .map(([name, ms]) => `${name} is ${row![name]}, the configuration wants ${ms}ms`);
}

/**
 * COMMIT, reporting an outcome it cannot prove as `CommitOutcomeUnknown`: the connection lost or
 * the answer not come in time (the client-side query_timeout, which sends no cancel: nothing
 * pixgate does cancels a COMMIT), or a WARNING with it — PostgreSQL's "canceling wait for
 * synchronous replication … The transaction has already committed locally, but might not have
 * been replicated to the standby": committed here, possibly lost at a failover. Any notice that is
 * not a plain NOTICE (SQLSTATE 00000) counts, whatever the server's message language. An error
 * with a SQLSTATE that proves the rollback (a deferred constraint, a serialization failure) stays
 * what it is.
 */
async function commit(client: pg.PoolClient, cell: { n: number }): Promise<void> {
  let warning: { code?: string; message?: string } | undefined;
  const onNotice = (notice: { code?: string; message?: string }) => {
    if (notice.code !== '00000') warning ??= notice;
  };
  client.on('notice', onNotice);
  try {
    cell.n++;
    await client.query('COMMIT');
  } catch (err) {
    if (provesRollback(err, true)) throw err;
    throw new CommitOutcomeUnknown(err);
  } finally {
    client.removeListener('notice', onNotice);
  }
  if (warning) throw new CommitOutcomeUnknown(warning);
}

/** The connection pool, with the startup parameters when straight to PostgreSQL, and its error listeners. */
function openPool(options: PostgresOptions, startupParameters: boolean): pg.Pool {
  const hosts = hostList(options.url);
  const pool = new pg.Pool({
    ...hosts.clientConfig(),
    max: options.max ?? 20,
    types,
    application_name: options.applicationName ?? 'pixgate',
    connectionTimeoutMillis: 10_000,
    idleTimeoutMillis: 30_000,
    ...(startupParameters ? timeoutParameters(options) : {}),
    // A server that stopped answering without closing the connection (a partition without RST, a
    // frozen host) would hold a statement until TCP gives up, many minutes later: past
    // statement_timeout and a margin no answer is coming, so the statement fails ("Query read
    // timeout", unavailable: 503) and its connection is discarded. Keepalive probes find dead
    // idle connections. It never cancels anything on the server; on a COMMIT it means "outcome
    // unknown" (see `transaction`).
    ...(options.statementTimeoutMs !== undefined ? { query_timeout: options.statementTimeoutMs + QUERY_TIMEOUT_MARGIN_MS } : {}),
    keepAlive: true,
  });
  // An idle client losing its connection must not crash the process; the pool replaces it.
  pool.on('error', () => {});
  // And every client has a listener of its own for its whole life: pg-pool takes its idle listener
  // off a client as it hands it out, and a new client can be handed out in the same read as a FATAL
  // (57P01 from pg_terminate_backend or a fast shutdown, arriving in one chunk with ReadyForQuery),
  // before the caller could add one: an unhandled 'error' event ended the process (issue 24, item
  // 15; test/faults/database-unavailable.test.ts). The statement or transaction on it fails on its
  // own, and the pool drops a client released with an error or no longer queryable.
  pool.on('connect', (client) => client.on('error', () => {}));
  return pool;
}

type Run = <R>(client: pg.Pool | pg.PoolClient, text: string, params?: readonly unknown[]) => Promise<R[]>;

/** Runs `fn` in one transaction on a client of the pool, retrying a serialization failure or deadlock. */
async function runTransaction<T>(pool: pg.Pool, run: Run, cell: { n: number }, wakeLocal: (name: string) => void, fn: (tx: Sql) => Promise<T>): Promise<T> {
  const companion = takeCompanion();
  for (let attempt = 1; ; attempt++) {
    const client = await pool.connect().catch((err: unknown) => settleCompanion(companion, err));
    let broken: Error | undefined;
    // A checked-out client has no listener of the pool: without this one, PostgreSQL ending the
    // connection between two statements (restart, terminate, timeout) kills the process with an
    // unhandled 'error' event. The transaction fails on its next statement; the client is discarded.
    const onLost = (err: Error) => void (broken ??= err);
    client.on('error', onLost);
    try {
      await run(client, 'BEGIN');
      const tx: Sql = {
        query: (text, params) => run(client, text, params),
        exec: async (script) => void (await run(client, script)),
      };
      const committed = commitHooksFor(tx);
      localWakesFor(tx, wakeLocal);
      if (companion) await companion.write(tx);
      const result = await fn(tx);
      await commit(client, cell);
      settleCompanion(companion);
      committed();
      return result;
    } catch (err) {
      if (err instanceof CommitOutcomeUnknown) {
        // Nothing to roll back, nothing to retry: the client answers 503 and its retry under
        // the same Idempotency-Key finds whatever did commit. The connection is not reused.
        broken = err;
        settleCompanion(companion, err);
      }
      try {
        await run(client, 'ROLLBACK');
      } catch (rollbackErr) {
        broken = rollbackErr as Error;
      }
      const state = sqlState(err);
      if (state !== undefined && RETRYABLE_STATES.has(state) && attempt < MAX_ATTEMPTS) {
        await new Promise((r) => setTimeout(r, Math.random() * 10 * attempt));
        continue;
      }
      settleCompanion(companion, err);
    } finally {
      client.removeListener('error', onLost);
      client.release(broken);
    }
  }
}

/** PostgreSQL server through a connection pool (node-postgres). */
export async function openPostgres(options: PostgresOptions): Promise<Database> {
  const pooler = options.pooler ?? 'none';
  const startupParameters = pooler === 'none';
  const prepare = pooler !== 'transaction';
  if (options.schema && !startupParameters) throw new Error('a schema is set through the startup parameter options: not behind a pooler (give the role a search_path)');
  const pool = openPool(options, startupParameters);
  const counts = new StatementCounts();
  let closed = false;
  const listener = notificationClient(options, () => closed, counts.cell('listen'));
  const listenerUnused = pooler === 'transaction' && options.listenUrl === undefined;
  // One view per statement source (Database.counted); all share the pool and the listener.
  const views = new Map<string, Database>();
  const view = (source: string): Database => {
    const existing = views.get(source);
    if (existing) return existing;
    const cell = counts.cell(source);
    const run = async <R>(client: pg.Pool | pg.PoolClient, text: string, params: readonly unknown[] = []) => {
      cell.n++;
      const name = prepare && params.length > 0 && !text.startsWith(PLAN_EACH_RUN) ? preparedName(text) : undefined;
      return (await client.query(name ? { name, text, values: params as unknown[] } : { text, values: params as unknown[] })).rows as R[];
    };
    const db: Database = {
      dialect: 'postgres',
      listen: (name, handler) => {
        if (listenerUnused) throw new Error('LISTEN does not work through a transaction-mode pooler: set DATABASE_LISTEN_URL');
        return listener.listen(name, handler);
      },
      // A statement of a context whose companion waits runs in a transaction with it (db.ts).
      query: (text, params) => (waitingCompanion() ? db.transaction((tx) => tx.query(text, params)) : run(pool, text, params)),
      transaction: (fn) => runTransaction(pool, run, cell, listener.wakeLocal, fn),
      async exec(script) {
        await run(pool, script);
      },
      async ping() {
        await run(pool, 'SELECT 1');
      },
      poolStats: () => ({ total: pool.totalCount, idle: pool.idleCount, waiting: pool.waitingCount }),
      statements: () => counts.snapshot(),
      counted: view,
      async close() {
        if (closed) return;
        closed = true;
        await listener.close();
        await pool.end();
      },
    };
    localWakesFor(db, listener.wakeLocal);
    views.set(source, db);
    return db;
  };
  return view('request');
}

/**
 * A new LISTEN connection listening on every channel of `listeners` in its schema (told to
 * `setSchema` once known) and dispatching their notifications to them; ended again if that fails.
 */
async function openListenConnection(options: PostgresOptions, listeners: ListenerSet, cell: { n: number }, setSchema: (schema: string) => void): Promise<pg.Client> {
  const c = hostList(options.listenUrl ?? options.url).newClient({
    types,
    application_name: `${options.applicationName ?? 'pixgate'}-listen`,
    connectionTimeoutMillis: 10_000,
    ...(options.schema ? { options: `-c search_path=${options.schema}` } : {}),
  });
  c.on('error', () => {}); // followed by 'end', handled by the caller
  let schema: string;
  try {
    await c.connect();
    cell.n++;
    schema = (await c.query<{ s: string }>('SELECT current_schema() AS s')).rows[0]!.s;
    setSchema(schema);
    for (const name of listeners.channels()) {
      cell.n++;
      await c.query(`LISTEN ${quoteChannel(channelName(schema, name))}`);
    }
  } catch (err) {
    void c.end().catch(() => {});
    throw err;
  }
  const prefix = `${schema}__`;
  c.on('notification', (n) => {
    if (n.channel.startsWith(prefix)) listeners.dispatch(n.channel.slice(prefix.length), n.payload ?? '');
  });
  return c;
}

/**
 * One dedicated connection (outside the pool) per Database for LISTEN. It connects on the first
 * `listen`, and when it is lost (restart, terminate) it reconnects with backoff, listens again on
 * every channel and tells every handler `null`: notifications sent meanwhile are gone.
 */
function notificationClient(options: PostgresOptions, isClosed: () => boolean, cell: { n: number }) {
  const listeners = new ListenerSet();
  let client: pg.Client | undefined;
  let connecting: Promise<pg.Client> | undefined;
  let schema = 'public';
  let retryTimer: NodeJS.Timeout | undefined;
  let backoffMs = 100;

  const connect = (): Promise<pg.Client> => {
    if (client) return Promise.resolve(client);
    connecting ??= (async () => {
      const c = await openListenConnection(options, listeners, cell, (s) => (schema = s));
      c.once('end', () => {
        if (client === c) client = undefined;
        if (!isClosed() && listeners.channels().length > 0) scheduleReconnect();
      });
      client = c;
      backoffMs = 100;
      return c;
    })().finally(() => {
      connecting = undefined;
    });
    return connecting;
  };

  const scheduleReconnect = () => {
    if (retryTimer || isClosed()) return;
    retryTimer = setTimeout(async () => {
      retryTimer = undefined;
      try {
        await connect();
        listeners.dispatchAll(null); // whatever was sent while we were away is lost: look again
      } catch {
        backoffMs = Math.min(backoffMs * 2, 5_000);
        scheduleReconnect();
      }
    }, backoffMs);
    retryTimer.unref();
  };

  return {
    async listen(name: string, handler: (payload: string | null) => void): Promise<() => Promise<void>> {
      const entry = listeners.add(name, handler);
      if (entry.first && client) {
        cell.n++;
        await client.query(`LISTEN ${quoteChannel(channelName(schema, name))}`);
      } else if (!client) {
        try {
          await connect(); // listens on every channel, this one included
        } catch {
          scheduleReconnect(); // the handler hears `null` once the connection is back
        }
      }
      return async () => {
        if (entry.remove() && client) {
          cell.n++;
          await client.query(`UNLISTEN ${quoteChannel(channelName(schema, name))}`).catch(() => {});
        }
      };
    },
    wakeLocal: (name: string) => listeners.dispatch(name, ''),
    async close() {
      if (retryTimer) clearTimeout(retryTimer);
      const c = client ?? (await connecting?.catch(() => undefined));
      client = undefined;
      await c?.end().catch(() => {});
    },
  };
}
