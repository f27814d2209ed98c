import { closeSync, mkdirSync, openSync, readFileSync, rmSync, writeSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { PGlite } from '@electric-sql/pglite';
import { channelName, commitHooksFor, settleCompanion, takeCompanion, waitingCompanion, INT8_OID, ListenerSet, localWakesFor, parseInt8, quoteChannel, StatementCounts, type Database, type Sql } from './db.js';

export interface PgliteOptions {
  /** A folder, or `memory://` for a throwaway in-memory database. */
  dataDir: string;
  /** A data-directory tarball (from `dumpDataDir`) to start from; used by tests to skip initdb. */
  loadDataDir?: Blob;
}

const parsers = { [INT8_OID]: parseInt8 };

/**
 * Embedded PostgreSQL (PGlite, WASM). One connection: every query and transaction runs one after
 * another, so row locks never wait. A data folder is guarded by a lock file so that two processes
 * cannot open it at once (which would corrupt it).
 */
export interface PgliteDatabase extends Database {
  /** The data folder as a tarball, for cloning (tests start from a migrated template this way). */
  dump(): Promise<Blob>;
}

export async function openPglite(options: PgliteOptions): Promise<PgliteDatabase> {
  const { pg, releaseLock } = await startPglite(options);
  const counts = new StatementCounts();
  const listenCell = counts.cell('listen');
  const local = new ListenerSet(); // the same handlers, for wakeLocal
  const wakeLocal = (name: string) => local.dispatch(name, '');
  let closed = false;
  // One view per statement source (Database.counted); all share the one PGlite instance.
  const views = new Map<string, PgliteDatabase>();
  const view = (source: string): PgliteDatabase => {
    const existing = views.get(source);
    if (existing) return existing;
    const cell = counts.cell(source);
    const base = countedSql(pg, cell);
    const db: PgliteDatabase = {
      dialect: 'pglite',
      // A statement of a context whose companion waits runs in a transaction with it (db.ts).
      query: (text, params) => (waitingCompanion() ? db.transaction((tx) => tx.query(text, params)) : base.query(text, params)),
      exec: base.exec,
      transaction: (fn) => runTransaction(pg, cell, wakeLocal, fn),
      async ping() {
        cell.n++;
        await pg.query('SELECT 1');
      },
      async listen(name, handler) {
        listenCell.n += 2;
        const schema = (await pg.query<{ s: string }>('SELECT current_schema() AS s')).rows[0]!.s;
        // PGlite delivers a notification to the same (only) connection after the sending
        // transaction commits; the channel name is an identifier, so it is quoted here.
        const unsubscribe = await pg.listen(quoteChannel(channelName(schema, name)), (payload) => handler(payload ?? ''));
        const entry = local.add(name, handler);
        return async () => {
          entry.remove();
          if (closed) return;
          listenCell.n++;
          await unsubscribe();
        };
      },
      statements: () => counts.snapshot(),
      counted: view,
      async dump() {
        return (await pg.dumpDataDir('none')) as Blob;
      },
      async close() {
        if (closed) return;
        closed = true;
        try {
          await pg.close();
        } finally {
          releaseLock();
        }
      },
    };
    localWakesFor(db, wakeLocal);
    views.set(source, db);
    return db;
  };
  return view('request');
}

/** Locks the data folder (not in memory) and starts PGlite on it; the lock is released if that fails. */
async function startPglite(options: PgliteOptions): Promise<{ pg: PGlite; releaseLock: () => void }> {
  const inMemory = options.dataDir === 'memory://';
  let releaseLock = () => {};
  let dir: string | undefined;
  if (!inMemory) {
    dir = resolve(options.dataDir);
    mkdirSync(dir, { recursive: true });
    releaseLock = acquireLock(join(dir, 'pixgate.lock'));
  }
  try {
    const pg = await PGlite.create(dir ?? 'memory://', {
      parsers,
      ...(options.loadDataDir ? { loadDataDir: options.loadDataDir } : {}),
    });
    return { pg, releaseLock };
  } catch (err) {
    releaseLock();
    throw err;
  }
}

/** The Sql handle over PGlite (or one of its transactions) that counts each statement in `cell`. */
function countedSql(q: Pick<PGlite, 'query' | 'exec'>, cell: { n: number }): Sql {
  return {
    async query<R>(text: string, params: readonly unknown[] = []): Promise<R[]> {
      cell.n++;
      const result = await q.query<R>(text, params as unknown[]);
      return result.rows;
    },
    async exec(script: string) {
      cell.n++;
      await q.exec(script);
    },
  };
}

/** Runs `fn` in one PGlite transaction, with the commit hooks, local wakes and a waiting companion. */
async function runTransaction<T>(pg: PGlite, cell: { n: number }, wakeLocal: (name: string) => void, fn: (tx: Sql) => Promise<T>): Promise<T> {
  let committed = () => {};
  cell.n += 2; // BEGIN and COMMIT (or ROLLBACK), sent by PGlite's transaction()
  const companion = takeCompanion();
  const result = await pg
    .transaction(async (tx) => {
      const handle = countedSql(tx, cell);
      committed = commitHooksFor(handle);
      localWakesFor(handle, wakeLocal);
      if (companion) await companion.write(handle);
      return fn(handle);
    })
    .catch((err: unknown) => settleCompanion(companion, err));
  settleCompanion(companion);
  committed();
  return result;
}

function acquireLock(path: string): () => void {
  for (let attempt = 0; attempt < 2; attempt++) {
    try {
      const fd = openSync(path, 'wx');
      writeSync(fd, String(process.pid));
      closeSync(fd);
      return () => rmSync(path, { force: true });
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
      const pid = Number(readFileSync(path, 'utf8').trim());
      if (Number.isInteger(pid) && pid > 0 && pid !== process.pid && isAlive(pid)) {
        throw new Error(`the data folder ${resolve(path, '..')} is in use by process ${pid}`);
      }
      rmSync(path, { force: true }); // stale lock of a process that died
    }
  }
  throw new Error(`cannot lock ${path}`);
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}
