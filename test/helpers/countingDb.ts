import { commitHooksFor, type Database, type Sql } from '../../src/db/db.js';
import type { TestDatabase } from './db.js';

/**
 * A test-local view of a Database that counts what reaches the database: every statement run
 * through `query`/`exec` (inside transactions too) and every transaction (BEGIN and COMMIT are two
 * more round trips each). `statements` keeps the SQL text of each, for the failure message.
 */
export interface StatementCounter {
  statements: string[];
  transactions: number;
  reset(): void;
  /** Statements plus BEGIN/COMMIT of each transaction: the round trips to the database. */
  roundTrips(): number;
}

export function countingDatabase(db: Database): { db: Database; counter: StatementCounter } {
  const counter: StatementCounter = {
    statements: [],
    transactions: 0,
    reset() {
      this.statements = [];
      this.transactions = 0;
    },
    roundTrips() {
      return this.statements.length + 2 * this.transactions;
    },
  };
  const record = (text: string) => counter.statements.push(text.replace(/\s+/g, ' ').trim().slice(0, 120));
  const wrapTx = (tx: Sql): Sql => ({
    query: (text, params) => {
      record(text);
      return tx.query(text, params);
    },
    exec: (script) => {
      record(script);
      return tx.exec(script);
    },
  });
  const wrapped: Database = {
    dialect: db.dialect,
    query: (text, params) => {
      record(text);
      return db.query(text, params);
    },
    exec: (script) => {
      record(script);
      return db.exec(script);
    },
    async transaction(fn) {
      counter.transactions++;
      // afterCommit() is keyed by the handle the code sees: give the wrapper its own hooks and run
      // those of the attempt that committed once the real transaction has.
      let runHooks = () => {};
      const result = await db.transaction((tx) => {
        const view = wrapTx(tx);
        runHooks = commitHooksFor(view);
        return fn(view);
      });
      runHooks();
      return result;
    },
    ping: () => db.ping(),
    close: () => db.close(),
    listen: (name, handler) => db.listen(name, handler),
    ...(db.poolStats ? { poolStats: () => db.poolStats!() } : {}),
  };
  return { db: wrapped, counter };
}

/** A TestDatabase whose handle counts statements (close/reopen act on the real one). */
export function countingTestDatabase(database: TestDatabase): { database: TestDatabase; counter: StatementCounter } {
  const { db, counter } = countingDatabase(database.db);
  return { database: { ...database, db }, counter };
}

/**
 * Counts the commands an ioredis client sends (by name: a MULTI … EXEC is several, a script run by
 * EVALSHA one), by wrapping the instance's sendCommand.
 */
export function countingRedis<R extends { sendCommand: (...args: any[]) => unknown }>(redis: R): { redis: R; calls: string[] } {
  const calls: string[] = [];
  const send = redis.sendCommand;
  redis.sendCommand = function (this: R, ...args: any[]) {
    calls.push(String((args[0] as { name?: unknown })?.name));
    return send.apply(this, args);
  } as R['sendCommand'];
  return { redis, calls };
}
