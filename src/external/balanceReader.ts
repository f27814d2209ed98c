import type { Sql } from '../db/db.js';
import { readBalancesOf, type Balances } from '../ledger/ledger.js';

/** Most accounts read by one statement; a larger batch is split. */
const MAX_BATCH = 500;
/** Statements of this reader running at once; reads that come meanwhile wait for the next. */
const MAX_IN_FLIGHT = 2;

/**
 * GET /balance reads through this: the reads that reach it in one turn of the event loop are
 * answered by one statement (`account_id = ANY(...)`, one row set per account however many
 * requests asked for it), sent when the turn ends (setImmediate); while MAX_IN_FLIGHT statements
 * run, new reads gather for the next one. Under load that is one round trip — one write to the
 * database socket, which dominated the profile — for many requests; alone, a request waits one
 * loop turn at most. Every read is answered by a statement that starts after the request arrived,
 * so each answer is as current as a read of its own.
 */
export class BalanceReader {
  private pending = new Map<number, { resolve: (b: Balances) => void; reject: (err: unknown) => void }[]>();
  private scheduled = false;
  private inFlight = 0;

  constructor(private readonly sql: Sql) {}

  read(accountId: number): Promise<Balances> {
    return new Promise((resolve, reject) => {
      const waiting = this.pending.get(accountId);
      if (waiting) waiting.push({ resolve, reject });
      else this.pending.set(accountId, [{ resolve, reject }]);
      this.schedule();
    });
  }

  private schedule(): void {
    if (this.scheduled || this.pending.size === 0 || this.inFlight >= MAX_IN_FLIGHT) return;
    this.scheduled = true;
    setImmediate(() => this.flush());
  }

  private flush(): void {
    this.scheduled = false;
    if (this.inFlight >= MAX_IN_FLIGHT) return;
    const batch = this.pending;
    this.pending = new Map();
    const ids = [...batch.keys()];
    for (let i = 0; i < ids.length; i += MAX_BATCH) void this.run(ids.slice(i, i + MAX_BATCH), batch);
  }

  private async run(ids: number[], batch: Map<number, { resolve: (b: Balances) => void; reject: (err: unknown) => void }[]>) {
    this.inFlight++;
    try {
      const balances = await readBalancesOf(this.sql, ids);
      for (const id of ids) for (const w of batch.get(id)!) w.resolve(balances.get(id)!);
    } catch (err) {
      for (const id of ids) for (const w of batch.get(id)!) w.reject(err);
    } finally {
      this.inFlight--;
      this.schedule();
    }
  }
}
