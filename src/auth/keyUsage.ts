import { performance } from 'node:perf_hooks';
import type { Sql } from '../db/db.js';
import { onePer } from '../lib/batcher.js';

/**
 * When each API key was last used, and from where (the keys page of the portal), recorded cheaply:
 * a process writes a key's row at most once per `USAGE_WRITE_INTERVAL_MS` (a monotonic clock), and
 * the upsert itself leaves a row younger than that untouched, so several processes together still
 * write it about once a minute. The shown time is so accurate to a minute. The row lives in its own
 * table (api_key_usage, migration 1600): an UPDATE of api_keys would fire auth_changed and empty
 * every process's credential cache. Writes run beside the request (never awaited by it); at most
 * `MAX_IN_FLIGHT` at once, past it a use is simply not recorded (the next one a minute later is).
 */
export const USAGE_WRITE_INTERVAL_MS = 60_000;
const MAX_TRACKED = 10_000;
const MAX_IN_FLIGHT = 4;

export interface KeyUsageOptions {
  /** Monotonic milliseconds (default performance.now; tests move their own). */
  now?: () => number;
}

export class KeyUsageRecorder {
  /** client_id → monotonic time of this process's last write (oldest first). */
  private readonly written = new Map<string, number>();
  private inFlight = 0;
  private readonly now: () => number;
  /** Statements this recorder sent (tests). */
  writes = 0;

  constructor(
    private readonly sql: Sql,
    options: KeyUsageOptions = {},
  ) {
    this.now = options.now ?? (() => performance.now());
  }

  /**
   * Notes a use of `clientId` from `ip` at `at` (wall clock). Returns the write when one is sent
   * (tests await it), null when the key was written less than a minute ago or too many writes run.
   */
  record(clientId: string, ip: string, at: Date): Promise<void> | null {
    const now = this.now();
    const last = this.written.get(clientId);
    if (last !== undefined && now - last < USAGE_WRITE_INTERVAL_MS) return null;
    if (this.inFlight >= MAX_IN_FLIGHT) return null;
    this.written.delete(clientId); // re-inserted last: the map's order is oldest first
    if (this.written.size >= MAX_TRACKED) this.written.delete(this.written.keys().next().value!);
    this.written.set(clientId, now);
    this.inFlight++;
    this.writes++;
    return recordUse(this.sql, clientId, ip.slice(0, 64), at).finally(() => this.inFlight--);
  }
}

/** One recorder per database handle (tests run several apps in one process). */
export const keyUsageFor = onePer((sql: Sql) => new KeyUsageRecorder(sql));

/** The upsert: a row written less than the interval ago stays as it is (another process wrote it). */
export async function recordUse(sql: Sql, clientId: string, ip: string, at: Date): Promise<void> {
  await sql.query(
    `INSERT INTO api_key_usage (client_id, last_used_at, last_used_ip) VALUES ($1, $2, $3)
     ON CONFLICT (client_id) DO UPDATE SET last_used_at = EXCLUDED.last_used_at, last_used_ip = EXCLUDED.last_used_ip
      WHERE api_key_usage.last_used_at <= EXCLUDED.last_used_at - make_interval(secs => $4)`,
    [clientId, at, ip, USAGE_WRITE_INTERVAL_MS / 1000],
  );
}
