import type { Sql } from '../db/db.js';
import { Batcher, type BatchObserver } from '../lib/batcher.js';
import { readBalancesOf, type Balances } from '../ledger/ledger.js';

/** Most reads answered by one statement; more wait for the next. */
const MAX_BATCH = 500;
/** Statements of this reader running at once; reads that come meanwhile wait for the next. */
const MAX_IN_FLIGHT = 2;

/**
 * GET /balance reads through this (a `Batcher`, src/lib/batcher.ts): the reads that reach it in
 * one turn of the event loop are answered by one statement (`account_id = ANY(...)`, one row set
 * per account however many requests asked for it); while MAX_IN_FLIGHT statements run, new reads
 * gather for the next one. Under load that is one round trip — one write to the database socket,
 * which dominated the profile — for many requests; alone, a request waits one loop turn at most.
 * Every read is answered by a statement that starts after the request arrived, so each answer is
 * as current as a read of its own.
 */
export class BalanceReader {
  private readonly batcher: Batcher<number, Balances>;

  constructor(sql: Sql, observe?: BatchObserver) {
    this.batcher = new Batcher({
      maxBatch: MAX_BATCH,
      maxInFlight: MAX_IN_FLIGHT,
      ...(observe ? { observe } : {}),
      run: async (accountIds) => {
        const balances = await readBalancesOf(sql, [...new Set(accountIds)]);
        return accountIds.map((id) => ({ ok: true, value: balances.get(id)! }));
      },
    });
  }

  read(accountId: number): Promise<Balances> {
    return this.batcher.submit(accountId);
  }
}
