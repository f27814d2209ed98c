import { shareLocalWakes, type Database } from './db.js';

/**
 * A view of `db` that holds at most `max` connections at once: each query and each transaction
 * takes a permit first, and waits in line for one when all are in use. Background workers (webhook
 * delivery, the rail simulator's engine and notifications, recovery, expiry, retention) get this
 * view with DATABASE_BACKGROUND_POOL_MAX permits, so however much work they have they never hold
 * more of the pool than that: requests always keep `DATABASE_POOL_MAX - DATABASE_BACKGROUND_POOL_MAX`
 * connections. Workers must not nest calls on the view (each call holds its permit until it ends).
 */
export function limitConcurrency(db: Database, max: number): Database {
  if (!Number.isInteger(max) || max < 1) throw new RangeError(`max must be a positive integer, got ${max}`);
  let inUse = 0;
  const waiting: (() => void)[] = [];
  const acquire = async (): Promise<void> => {
    if (inUse < max) {
      inUse++;
      return;
    }
    await new Promise<void>((resolve) => waiting.push(resolve));
  };
  const release = () => {
    const next = waiting.shift();
    if (next) next(); // the permit passes straight to the next in line
    else inUse--;
  };
  const limited = async <T>(fn: () => Promise<T>): Promise<T> => {
    await acquire();
    try {
      return await fn();
    } finally {
      release();
    }
  };
  const view = (db: Database): Database => {
    const limitedView: Database = {
      dialect: db.dialect,
      query: (text, params) => limited(() => db.query(text, params)),
      exec: (script) => limited(() => db.exec(script)),
      transaction: (fn) => limited(() => db.transaction(fn)),
      ping: () => db.ping(),
      listen: (name, handler) => db.listen(name, handler),
      statements: () => db.statements(),
      counted: (source) => view(db.counted(source)), // the same permits, counted under `source`
      close: () => db.close(),
    };
    // A statement run on the view wakes this process's listeners as one run on `db` does
    // (`wakeLocal`: the webhook dispatcher after a settlement written outside a transaction).
    shareLocalWakes(db, limitedView);
    return limitedView;
  };
  return view(db);
}
