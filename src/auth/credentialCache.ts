import { performance } from 'node:perf_hooks';
import type { Database, Sql } from '../db/db.js';
import { findKeyForAuth, type KeyWithAccount } from './apiKeys.js';
import { findCentralKey, type CentralKeyRow } from './centralKeys.js';
import { secretDigest } from './secrets.js';

/** The notification channel the triggers of migration 0610 send on (see `invalidate`). */
export const AUTH_CHANGED = 'auth_changed';

/** Most entries kept per cache; past it the oldest entry is dropped first. */
const MAX_ENTRIES = 10_000;

interface Entry<T> {
  value: T;
  /** performance.now() after which the entry is read again from the database. */
  until: number;
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
 */
export class CredentialCache {
  private readonly keys = new Map<string, Entry<KeyWithAccount>>();
  private readonly central = new Map<string, Entry<CentralKeyRow>>();
  private epoch = 0;
  private listening = false;
  private unsubscribe: (() => Promise<void>) | undefined;

  constructor(private readonly ttlMs: number) {}

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
    return this.lookup(this.keys, clientId, () => findKeyForAuth(sql, clientId));
  }

  /** The central key a presented `X-API-Key` is (findCentralKey), from the cache when fresh. */
  centralKey(sql: Sql, apiKey: string): Promise<CentralKeyRow | undefined> {
    return this.lookup(this.central, secretDigest(apiKey), () => findCentralKey(sql, apiKey));
  }

  /** A fresh entry, or the row read now and kept (an unknown id is never kept). */
  private async lookup<V>(map: Map<string, Entry<V>>, cacheKey: string, read: () => Promise<V | undefined>): Promise<V | undefined> {
    const hit = map.get(cacheKey);
    if (hit && hit.until > performance.now()) return hit.value;
    const epoch = this.epoch;
    const row = await read();
    if (row) this.keep(map, cacheKey, row, epoch);
    else map.delete(cacheKey);
    return row;
  }

  /**
   * Drops what a change makes stale: `key:<client_id>`, `account:<id>` (keys operating on it),
   * `merchant:<id>` (its keys), `central:<id>`; `null`, an empty or unknown payload: everything.
   */
  invalidate(payload: string | null): void {
    this.epoch++;
    const colon = payload ? payload.indexOf(':') : -1;
    const kind = colon > 0 ? payload!.slice(0, colon) : '';
    const id = colon > 0 ? payload!.slice(colon + 1) : '';
    switch (kind) {
      case 'key':
        this.keys.delete(id);
        return;
      case 'account':
        for (const [k, e] of this.keys) if (String(e.value.operating_account_id) === id || String(e.value.account_id) === id) this.keys.delete(k);
        return;
      case 'merchant':
        for (const [k, e] of this.keys) if (String(e.value.merchant_id) === id) this.keys.delete(k);
        return;
      case 'central':
        for (const [k, e] of this.central) if (String(e.value.id) === id) this.central.delete(k);
        return;
      default:
        this.clear();
    }
  }

  clear(): void {
    this.keys.clear();
    this.central.clear();
  }

  /** Entries held (tests). */
  get size(): number {
    return this.keys.size + this.central.size;
  }

  private keep<T>(map: Map<string, Entry<T>>, id: string, value: T, epochBefore: number): void {
    if (!this.listening || this.epoch !== epochBefore) return;
    map.delete(id); // re-inserted last: the map's order is oldest first
    if (map.size >= MAX_ENTRIES) map.delete(map.keys().next().value!);
    map.set(id, { value, until: performance.now() + this.ttlMs });
  }
}
