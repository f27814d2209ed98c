import { performance } from 'node:perf_hooks';
import type { Database, Sql } from '../db/db.js';
import { Batcher, onePer } from '../lib/batcher.js';
import { findKeysForAuth, type KeyWithAccount } from './apiKeys.js';
import { findCentralKey, type CentralKeyRow } from './centralKeys.js';
import { secretDigest } from './secrets.js';

/** The notification channel the triggers of migration 0610 send on (see `invalidate`). */
export const AUTH_CHANGED = 'auth_changed';

/** Most entries kept per cache; past it the oldest entry is dropped first. */
const MAX_ENTRIES = 10_000;
/** Key look-ups one statement answers (`findKeysForAuth`), and such statements at once. */
const READ_BATCH = 500;
const READS_IN_FLIGHT = 2;

interface Entry<T> {
  value: T;
  /** `now()` from which a look-up answers with the entry and reads it again in the background. */
  renewAt: number;
  /** `now()` from which the entry is not answered: the look-up waits for a read. */
  until: number;
}

/** Entries of one kind and the reads of them under way (at most one per entry and epoch). */
class Shelf<T> {
  readonly entries = new Map<string, Entry<T>>();
  readonly reading = new Map<string, { epoch: number; row: Promise<T | undefined> }>();
}

/** One Batcher of key look-ups per database (tests run several apps in one process). */
const keyReader = onePer(
  (sql: Sql) =>
    new Batcher<string, KeyWithAccount | undefined>({
      maxBatch: READ_BATCH,
      maxInFlight: READS_IN_FLIGHT,
      run: async (clientIds) => {
        const rows = await findKeysForAuth(sql, [...new Set(clientIds)]);
        return clientIds.map((id) => ({ ok: true, value: rows.get(id) }));
      },
    }),
);

export interface CredentialCacheOptions {
  /** Milliseconds of a monotonic clock (default performance.now; tests move their own). */
  now?: () => number;
}

/**
 * What authentication reads, kept in process for `ttlMs` (AUTH_CACHE_TTL_MS) so a request of a
 * known key costs no statement: the API key row with its account and merchant status, and the
 * boleto central keys. Nothing in it is a secret in clear: an API key entry holds the row, whose
 * `secret_hash` the presented secret is compared with (constant time) on every request; a central
 * key entry is found by the SHA-256 digest of the presented key.
 *
 * Invalidation is immediate and crosses processes: triggers on api_keys, accounts, merchants and
 * central_api_keys (migration 0610) NOTIFY `auth_changed` in the transaction that changes a row,
 * and every process LISTENs and drops the entries concerned when it commits. `null` (the listening
 * connection was lost: notifications may have been missed) drops everything. The TTL is only the
 * safety net for that window; expiry never waits for it, since `expires_at` is checked on every
 * request against the clock. Unknown client ids are never cached (a flood of made-up ids cannot
 * fill the cache or hide a key created later).
 *
 * A lookup that ran while an invalidation arrived is answered but not kept: the row it read may
 * predate the change (the `epoch` check).
 *
 * Under load no request waits for a read of a key it uses all the time, and a read is never
 * repeated: concurrent look-ups of one entry share its read (within one epoch), look-ups of API
 * keys that happen together share one statement (a `Batcher`), and an entry past half its TTL is
 * answered at once while it is read again in the background (refresh-ahead), so it is renewed
 * before it runs out. Without that, every key cached at the same moment ran out at the same
 * moment, and every request in flight read its key on its own: under the bench, a burst of
 * look-ups queued ahead of the money statements every 5 s and stalled all requests ~150 ms.
 * A background read that fails leaves the entry to serve until `until`, no longer.
 */
export class CredentialCache {
  private readonly keys = new Shelf<KeyWithAccount>();
  private readonly central = new Shelf<CentralKeyRow>();
  private epoch = 0;
  private listening = false;
  private unsubscribe: (() => Promise<void>) | undefined;
  private readonly now: () => number;
  private readonly watchers = new Set<() => void>();

  constructor(
    private readonly ttlMs: number,
    options: CredentialCacheOptions = {},
  ) {
    this.now = options.now ?? (() => performance.now());
  }

  /** Subscribes to `auth_changed` on `db`; entries are only kept once it listens. */
  async listen(db: Database): Promise<void> {
    if (this.ttlMs <= 0 || this.unsubscribe) return;
    this.unsubscribe = await db.listen(AUTH_CHANGED, (payload) => this.invalidate(payload));
    this.listening = true;
  }

  async close(): Promise<void> {
    this.listening = false;
    this.clear();
    const unsubscribe = this.unsubscribe;
    this.unsubscribe = undefined;
    await unsubscribe?.();
  }

  /** The key row of `clientId` as stage 3 needs it (findKeyForAuth), from the cache when fresh. */
  apiKey(sql: Sql, clientId: string): Promise<KeyWithAccount | undefined> {
    return this.lookup(this.keys, clientId, () => keyReader(sql).submit(clientId));
  }

  /** The central key a presented `X-API-Key` is (findCentralKey), from the cache when fresh. */
  centralKey(sql: Sql, apiKey: string): Promise<CentralKeyRow | undefined> {
    return this.lookup(this.central, secretDigest(apiKey), () => findCentralKey(sql, apiKey));
  }

  /**
   * The entry while it lasts (read again in the background past `renewAt`), else the row read now
   * and kept (an unknown id is never kept).
   */
  private async lookup<V>(shelf: Shelf<V>, cacheKey: string, read: () => Promise<V | undefined>): Promise<V | undefined> {
    const hit = shelf.entries.get(cacheKey);
    if (hit) {
      const now = this.now();
      if (hit.until > now) {
        if (hit.renewAt <= now) this.read(shelf, cacheKey, read).catch(() => {}); // the entry serves until `until`
        return hit.value;
      }
    }
    return this.read(shelf, cacheKey, read);
  }

  /** The read of `cacheKey` under way in this epoch, or a new one; its row is kept when it lands. */
  private read<V>(shelf: Shelf<V>, cacheKey: string, read: () => Promise<V | undefined>): Promise<V | undefined> {
    const pending = shelf.reading.get(cacheKey);
    if (pending && pending.epoch === this.epoch) return pending.row;
    const epoch = this.epoch;
    const row = read().then(
      (value) => {
        if (shelf.reading.get(cacheKey)?.row === row) shelf.reading.delete(cacheKey);
        if (value) this.keep(shelf, cacheKey, value, epoch);
        else shelf.entries.delete(cacheKey);
        return value;
      },
      (err: unknown) => {
        if (shelf.reading.get(cacheKey)?.row === row) shelf.reading.delete(cacheKey);
        throw err;
      },
    );
    shelf.reading.set(cacheKey, { epoch, row });
    return row;
  }

  /**
   * Drops what a change makes stale: `key:<client_id>`, `account:<id>` (keys operating on it),
   * `merchant:<id>` (its keys), `central:<id>`; `null`, an empty or unknown payload: everything.
   */
  invalidate(payload: string | null): void {
    this.drop(payload);
    for (const watcher of this.watchers) watcher();
  }

  /**
   * Calls `watcher` after every invalidation, once the entries concerned are dropped (what lasts
   * beyond one request — the live events stream — checks its credentials again then). Returns the
   * unsubscribe. Notifications only come while the cache listens (a TTL above 0).
   */
  onChange(watcher: () => void): () => void {
    this.watchers.add(watcher);
    return () => this.watchers.delete(watcher);
  }

  private drop(payload: string | null): void {
    this.epoch++;
    const colon = payload ? payload.indexOf(':') : -1;
    const kind = colon > 0 ? payload!.slice(0, colon) : '';
    const id = colon > 0 ? payload!.slice(colon + 1) : '';
    switch (kind) {
      case 'key':
        this.keys.entries.delete(id);
        return;
      case 'account':
        for (const [k, e] of this.keys.entries) if (String(e.value.operating_account_id) === id || String(e.value.account_id) === id) this.keys.entries.delete(k);
        return;
      case 'merchant':
        for (const [k, e] of this.keys.entries) if (String(e.value.merchant_id) === id) this.keys.entries.delete(k);
        return;
      case 'central':
        for (const [k, e] of this.central.entries) if (String(e.value.id) === id) this.central.entries.delete(k);
        return;
      default:
        this.clear();
    }
  }

  clear(): void {
    this.keys.entries.clear();
    this.central.entries.clear();
  }

  /** Entries held (tests). */
  get size(): number {
    return this.keys.entries.size + this.central.entries.size;
  }

  private keep<T>(shelf: Shelf<T>, id: string, value: T, epochBefore: number): void {
    if (!this.listening || this.epoch !== epochBefore) return;
    const map = shelf.entries;
    map.delete(id); // re-inserted last: the map's order is oldest first
    if (map.size >= MAX_ENTRIES) map.delete(map.keys().next().value!);
    const now = this.now();
    map.set(id, { value, renewAt: now + this.ttlMs / 2, until: now + this.ttlMs });
  }
}
