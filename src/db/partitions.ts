import type { Database, Sql } from './db.js';

/**
 * Daily range partitions (issue 25, item 5). A table partitioned by RANGE over one timestamptz
 * column has one partition per UTC day, `<table>_pYYYYMMDD`, covering [day 00:00Z, next day 00:00Z),
 * and a DEFAULT partition `<table>_default` for whatever no day covers, so an insert never fails.
 * Which tables, and what drops together, is the caller's (src/retention/partitions.ts).
 *
 * Every change of partitions runs in a transaction under one advisory lock (PARTITION_LOCK), so
 * processes maintaining the same database take turns and each partition is created once; each
 * step re-reads the catalog under the lock. A short lock_timeout keeps a maintenance pass from
 * queueing the application's writes behind it: if the table is busy the pass fails and the next
 * one tries again (partitions are made days ahead).
 */

export interface DailyPartitioned {
  table: string;
  /** The partition key column (timestamptz). */
  key: string;
}

const DAY_MS = 86_400_000;
// Any constant: every pixgate process changing partitions takes this advisory lock.
export const PARTITION_LOCK = 7_245_800;
// Below deadlock_timeout (1 s): a pass waiting on the application's locks gives up before any
// transaction waiting behind it could be picked as a deadlock victim, and holds writers up at most this long.
const LOCK_TIMEOUT = '500ms';

/** Midnight UTC of the day of `t`. */
export function dayStart(t: Date): Date {
  return new Date(Math.floor(t.getTime() / DAY_MS) * DAY_MS);
}

/** `<table>_pYYYYMMDD` for the day starting at `day`. */
export function partitionName(table: string, day: Date): string {
  return `${table}_p${day.toISOString().slice(0, 10).replaceAll('-', '')}`;
}

/** The day a partition name covers, or null for the default partition and foreign names. */
export function partitionDay(table: string, name: string): Date | null {
  const m = new RegExp(`^${table}_p(\\d{4})(\\d{2})(\\d{2})$`).exec(name);
  return m ? new Date(`${m[1]}-${m[2]}-${m[3]}T00:00:00Z`) : null;
}

/** A change of partitions that gave up on a busy table (lock_timeout): the next pass tries again. */
export function isLockTimeout(err: unknown): boolean {
  return (err as { code?: unknown } | null)?.code === '55P03';
}

/**
 * Takes the partition lock in the transaction `tx` (waiting as long as another process's pass
 * takes), then sets a short lock_timeout for the table locks that follow.
 */
export async function lockPartitions(tx: Sql): Promise<void> {
  await tx.query('SELECT pg_advisory_xact_lock($1)', [PARTITION_LOCK]);
  await tx.query(`SELECT set_config('lock_timeout', $1, true)`, [LOCK_TIMEOUT]);
}

/** The daily partitions of `table` in the current schema, oldest first, with their day. */
export async function listDailyPartitions(sql: Sql, table: string): Promise<{ name: string; day: Date }[]> {
  const rows = await sql.query<{ name: string }>(
    `SELECT c.relname AS name FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
      WHERE i.inhparent = to_regclass($1) ORDER BY c.relname`,
    [table],
  );
  return rows.flatMap((r) => {
    const day = partitionDay(table, r.name);
    return day ? [{ name: r.name, day }] : [];
  });
}

/**
 * Creates the daily partitions of `tables` for the day of `from` (default: the database's now(),
 * the clock that stamps the rows) and the `daysAhead` days after it, those missing only: running it
 * again, or in several processes at once, changes nothing more. A day whose rows already sit in the
 * default partition (nobody made its partition in time) is left to the default — its partition
 * could not be created over them — and reported in `skipped`. Returns the partitions created.
 */
export async function ensureDailyPartitions(
  db: Database,
  tables: readonly DailyPartitioned[],
  options: { daysAhead: number; from?: Date },
): Promise<{ created: string[]; skipped: string[] }> {
  return db.transaction(async (tx) => {
    await lockPartitions(tx);
    const from = options.from ?? (await tx.query<{ now: Date }>('SELECT now() AS now'))[0]!.now;
    const first = dayStart(from).getTime();
    const created: string[] = [];
    const skipped: string[] = [];
    for (const { table, key } of tables) {
      const present = new Set((await listDailyPartitions(tx, table)).map((p) => p.name));
      for (let i = 0; i <= options.daysAhead; i++) {
        const lo = new Date(first + i * DAY_MS);
        const hi = new Date(first + (i + 1) * DAY_MS);
        const name = partitionName(table, lo);
        if (present.has(name)) continue;
        const stranded = await tx.query(`SELECT 1 FROM ${table}_default WHERE ${key} >= $1 AND ${key} < $2 LIMIT 1`, [lo, hi]);
        if (stranded.length > 0) {
          skipped.push(name);
          continue;
        }
        await tx.exec(`CREATE TABLE ${name} PARTITION OF ${table} FOR VALUES FROM ('${lo.toISOString()}') TO ('${hi.toISOString()}')`);
        created.push(name);
      }
    }
    return { created, skipped };
  });
}
