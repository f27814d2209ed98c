import { isDatabaseUnavailable, type Database } from './db.js';
import { openPostgres, type PostgresOptions } from './postgres.js';

/**
 * Reads that tolerate bounded staleness (DATABASE_READ_URL): the statement, the transaction list
 * and the portal's CSV export. Never the money path: balance checks, reservations, idempotency,
 * lookups right after a write all read the primary (`ctx.db`).
 *
 * The replica is read only while its measured lag is within `maxLagMs` (DATABASE_READ_MAX_LAG_MS):
 * every `checkEveryMs` it answers `now() - pg_last_xact_replay_timestamp()` — how old the last
 * transaction it has applied is (0 on a server not in recovery). Between two checks the lag can
 * grow by at most the interval, so a read sees every commit older than
 * `maxLagMs + checkEveryMs` (the bound docs/deploy-database.md gives; the primary's and the
 * replica's clocks are assumed synchronized, NTP). Past the bound, on a failed check, or when a
 * read on the replica finds it unavailable, reads go to the primary until a check succeeds again. An
 * idle primary makes the replay timestamp age: the replica is then skipped although it is
 * current — the safe side, and the primary has time to spare when nothing commits.
 */
export interface ReadReplica extends Database {
  /** The last lag measured, in ms; undefined while the replica is not used. */
  lagMs(): number | undefined;
  /** Whether reads go to the replica right now. */
  usingReplica(): boolean;
}

export async function openReadReplica(
  primary: Database,
  options: PostgresOptions & { maxLagMs: number; checkEveryMs?: number },
): Promise<ReadReplica> {
  const replica = await openPostgres({ ...options, applicationName: `${options.applicationName ?? 'pixgate'}-read` });
  const checkEveryMs = options.checkEveryMs ?? 500;
  let lag: number | undefined;
  let closed = false;
  const usable = () => lag !== undefined && lag <= options.maxLagMs;

  const check = async () => {
    try {
      const [row] = await replica.query<{ lag: number | null }>(
        `SELECT CASE WHEN pg_is_in_recovery()
                     THEN (extract(epoch FROM clock_timestamp() - pg_last_xact_replay_timestamp()) * 1000)::int8
                     ELSE 0 END AS lag`,
      );
      lag = row!.lag === null ? undefined : Math.max(0, row!.lag); // null: nothing replayed yet
    } catch {
      lag = undefined;
    }
  };
  await check();
  let timer: NodeJS.Timeout | undefined;
  const loop = () => {
    timer = setTimeout(() => {
      void check().finally(() => {
        if (!closed) loop();
      });
    }, checkEveryMs);
    timer.unref();
  };
  loop();

  const onReplica = async <T>(read: (db: Database) => Promise<T>): Promise<T> => {
    if (!usable()) return read(primary);
    try {
      return await read(replica);
    } catch (err) {
      if (!isDatabaseUnavailable(err)) throw err;
      lag = undefined; // until the next check finds it again
      return read(primary);
    }
  };

  const db: ReadReplica = {
    ...primary,
    query: (text, params) => onReplica((d) => d.query(text, params)),
    transaction: (fn) => onReplica((d) => d.transaction(fn)),
    lagMs: () => lag,
    usingReplica: usable,
    async close() {
      closed = true;
      if (timer) clearTimeout(timer);
      await replica.close();
    },
  };
  return db;
}
