import { createHash } from 'node:crypto';
import pg from 'pg';
import { channelName, PLAN_EACH_RUN, commitHooksFor, settleCompanion, takeCompanion, waitingCompanion, INT8_OID, ListenerSet, parseInt8, localWakesFor, quoteChannel, RETRYABLE_STATES, sqlState, StatementCounts, type Database, type Sql } from './db.js';

export interface PostgresOptions {
  url: string;
  /** Pool size per process. */
  max?: number;
  /** Sets `search_path` on every connection (tests give each test its own schema). */
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

/** PostgreSQL server through a connection pool (node-postgres). */
export async function openPostgres(options: PostgresOptions): Promise<Database> {
  const pool = new pg.Pool({
    connectionString: options.url,
    max: options.max ?? 20,
    types,
    application_name: options.applicationName ?? 'pixgate',
    connectionTimeoutMillis: 10_000,
    idleTimeoutMillis: 30_000,
    ...(options.schema ? { options: `-c search_path=${options.schema}` } : {}),
    // Every connection cancels a statement running past statement_timeout (57014), gives up a lock
    // wait past lock_timeout (55P03) and is closed by the server when it sits idle inside a
    // transaction past idle_in_transaction_session_timeout (25P03).
    ...(options.statementTimeoutMs !== undefined ? { statement_timeout: options.statementTimeoutMs } : {}),
    ...(options.lockTimeoutMs !== undefined ? { lock_timeout: options.lockTimeoutMs } : {}),
    ...(options.idleInTransactionTimeoutMs !== undefined ? { idle_in_transaction_session_timeout: options.idleInTransactionTimeoutMs } : {}),
    // A server that stopped answering without closing the connection (a partition without RST, a
    // frozen host) would hold a statement until TCP gives up, many minutes later: past
    // statement_timeout and a margin no answer is coming, so the statement fails ("Query read
    // timeout", unavailable: 503) and its connection is discarded. Keepalive probes find dead
    // idle connections.
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
  const counts = new StatementCounts();
  let closed = false;
  const listener = notificationClient(options, () => closed, counts.cell('listen'));
  // One view per statement source (Database.counted); all share the pool and the listener.
  const views = new Map<string, Database>();
  const view = (source: string): Database => {
    const existing = views.get(source);
    if (existing) return existing;
    const cell = counts.cell(source);
    const run = async <R>(client: pg.Pool | pg.PoolClient, text: string, params: readonly unknown[] = []) => {
      cell.n++;
      const name = params.length > 0 && !text.startsWith(PLAN_EACH_RUN) ? preparedName(text) : undefined;
      return (await client.query(name ? { name, text, values: params as unknown[] } : { text, values: params as unknown[] })).rows as R[];
    };
    const db: Database = {
      dialect: 'postgres',
      listen: (name, handler) => listener.listen(name, handler),
      // A statement of a context whose companion waits runs in a transaction with it (db.ts).
      query: (text, params) => (waitingCompanion() ? db.transaction((tx) => tx.query(text, params)) : run(pool, text, params)),
      async transaction(fn) {
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
            localWakesFor(tx, listener.wakeLocal);
            if (companion) await companion.write(tx);
            const result = await fn(tx);
            await run(client, 'COMMIT');
            settleCompanion(companion);
            committed();
            return result;
          } catch (err) {
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
      },
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
      const c = new pg.Client({
        connectionString: options.url,
        application_name: `${options.applicationName ?? 'pixgate'}-listen`,
        connectionTimeoutMillis: 10_000,
        ...(options.schema ? { options: `-c search_path=${options.schema}` } : {}),
      });
      c.on('error', () => {}); // followed by 'end', handled below
      try {
        await c.connect();
        cell.n++;
        schema = (await c.query<{ s: string }>('SELECT current_schema() AS s')).rows[0]!.s;
        for (const name of listeners.channels()) {
          cell.n++;
          await c.query(`LISTEN ${quoteChannel(channelName(schema, name))}`);
        }
      } catch (err) {
        void c.end().catch(() => {});
        throw err;
      }
      c.on('notification', (n) => {
        const prefix = `${schema}__`;
        if (n.channel.startsWith(prefix)) listeners.dispatch(n.channel.slice(prefix.length), n.payload ?? '');
      });
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
