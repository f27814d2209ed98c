import type { Database, Sql } from '../../src/db/db.js';

/** One statement a Database ran: its SQL and the transaction it ran in (null: on its own). */
export interface Statement {
  text: string;
  tx: number | null;
}

/**
 * Records every statement `db` runs from now on, and its views (`counted`: the rail's and the
 * background workers'): each object is patched in place, so everything that holds it — the
 * background pool of src/db/limit.ts, the rail simulator — is counted too. A transaction counts
 * its BEGIN and COMMIT as statements: each is a round trip on PostgreSQL.
 */
export function recordStatements(db: Database): { log: Statement[]; take(): Statement[]; stop(): void } {
  const log: Statement[] = [];
  let seq = 0;
  const targets = [...new Set([db, ...(typeof db.counted === 'function' ? ['rail', 'background'].map((source) => db.counted(source)) : [])])];
  const restore = targets.map((target) => {
    const query = target.query;
    const transaction = target.transaction;
    target.query = ((text: string, params?: readonly unknown[]) => {
      log.push({ text, tx: null });
      return query.call(target, text, params);
    }) as Database['query'];
    target.transaction = (<T>(fn: (tx: Sql) => Promise<T>) =>
      transaction.call(target, async (tx: Sql) => {
        const id = ++seq;
        log.push({ text: 'BEGIN', tx: id });
        const txQuery = tx.query;
        tx.query = ((text: string, params?: readonly unknown[]) => {
          log.push({ text, tx: id });
          return txQuery.call(tx, text, params);
        }) as Sql['query'];
        const result = await fn(tx);
        log.push({ text: 'COMMIT', tx: id });
        return result;
      })) as Database['transaction'];
    return () => {
      target.query = query;
      target.transaction = transaction;
    };
  });
  return {
    log,
    take: () => log.splice(0, log.length),
    stop() {
      for (const undo of restore) undo();
    },
  };
}

/** Round trips of a statement list: statements, with BEGIN and COMMIT of each transaction. */
export function summarize(statements: readonly Statement[]): { total: number; transactions: number; text: string[] } {
  return {
    total: statements.length,
    transactions: new Set(statements.filter((s) => s.tx !== null).map((s) => s.tx)).size,
    text: statements.map((s) => `${s.tx === null ? '   ' : `T${s.tx}`.padEnd(3)} ${s.text.replace(/\s+/g, ' ').slice(0, 110)}`),
  };
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
