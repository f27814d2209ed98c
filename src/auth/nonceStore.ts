import type { Redis } from 'ioredis';
import { RELAXED_COMMIT, type Database } from '../db/db.js';
import { Batcher, type BatchObserver, type BatchOutcome } from '../lib/batcher.js';
import { dayStart } from '../db/partitions.js';
import type { Clock } from '../lib/clock.js';
import { RedisFixedWindow, type FixedWindowCounter, type WindowHit } from '../ratelimit/fixedWindow.js';

/**
 * Replay protection for signature v2. A nonce is claimed atomically with a fingerprint of what it
 * signed; claiming it again with the same fingerprint is a byte-identical repeat (allowed through
 * to the idempotency stage), with another fingerprint a replay attack (409).
 *
 * Two tiers: a fast store answers first (Redis, shared by every process; or process memory), and
 * a nonce it lets through is then recorded in the database (DurableNonces), whose answer decides.
 * Redis may forget (a failover to a replica that missed the last writes, a flush, a new Redis; a
 * restart for process memory); the database does not, for the nonce's whole lifetime.
 */
export type NonceClaim = 'claimed' | 'repeat' | 'conflict';

export interface NonceStore {
  /** `signedAt`: the request's signed X-Request-Timestamp (the durable record's partition day). */
  claim(scope: string, nonce: string, fingerprint: string, ttlSeconds: number, signedAt: Date): Promise<NonceClaim>;
}

export class NonceStoreUnavailableError extends Error {
  override name = 'NonceStoreUnavailableError';
}

interface NonceRecord {
  scope: string;
  nonce: string;
  fingerprint: string;
  expiresAt: Date;
  /** Midnight UTC of the signed timestamp's day. */
  signedDay: Date;
}

/** Nonces recorded by one statement, and such statements at once (as the idempotency claims). */
const RECORD_BATCH = 200;
const RECORDS_IN_FLIGHT = 2;

/**
 * The durable side of the nonce store (table request_nonces): the fast store (Redis, or process
 * memory) answers first, and every nonce it does not refuse is recorded here before the request
 * goes on. Redis alone forgets a nonce on a failover to a replica that had not received it, a
 * flush, or a new Redis; the database does not, so the nonce is still refused for other content
 * (409) for its whole lifetime, and a byte-identical repeat still reaches the idempotency check.
 *
 * Cost: group commit (src/lib/batcher.ts) — the nonces of one event-loop turn, and those that
 * arrive while two statements are running, go in one INSERT, whose commit waits for no disk
 * flush (see `record`); a fresh nonce is one row of it. Only
 * a nonce already there (a repeat, or a reuse the fast store had forgotten) costs a second
 * statement to read what it was claimed with.
 */
export class DurableNonces {
  private readonly records: Batcher<NonceRecord, string>;

  constructor(
    private readonly db: Database,
    private readonly clock: Clock,
    options: { observeBatch?: (name: string) => BatchObserver } = {},
  ) {
    this.records = new Batcher({
      maxBatch: RECORD_BATCH,
      maxInFlight: RECORDS_IN_FLIGHT,
      name: 'the nonce queue',
      run: (items) => this.record(items),
      ...(options.observeBatch ? { observe: options.observeBatch('nonce_record') } : {}),
    });
  }

  /**
   * Records `nonce` of `scope` with `fingerprint` unless a live record of it exists; answers what
   * the database holds: 'claimed' (recorded now, or over an expired record), 'repeat' (recorded
   * before with this fingerprint) or 'conflict' (with another; `fingerprint` then names it).
   */
  async claim(scope: string, nonce: string, fingerprint: string, ttlSeconds: number, signedAt: Date): Promise<{ claim: NonceClaim; fingerprint: string }> {
    const now = this.clock.now();
    const stored = await this.records.submit({ scope, nonce, fingerprint, expiresAt: new Date(now.getTime() + ttlSeconds * 1000), signedDay: dayStart(signedAt) });
    if (stored === NEW) return { claim: 'claimed', fingerprint };
    return { claim: stored === fingerprint ? 'repeat' : 'conflict', fingerprint: stored };
  }

  /**
   * The table is partitioned by the day of the signed timestamp (migration 0910) and a record's key
   * is (client, nonce, that day): a replay carries the same signed timestamp, so it meets the
   * first claim in the same partition, whatever day the server's clock has reached since.
   *
   * One INSERT for a batch: rows in key order (two batches never deadlock), a key twice in the
   * batch goes to the item that came first, and an expired record is taken over. Its commit does
   * not wait for the disk (RELAXED_COMMIT): the record is visible to every connection at once,
   * and durable — on the primary and on a synchronous standby — before anything runs under the
   * nonce, because the request's next write (its Idempotency-Key claim, a synchronous commit)
   * flushes the WAL through it. A crash of the database can lose only the records of requests
   * that had written nothing after them: requests that executed nothing. The items whose
   * nonce was already recorded (nothing returned for them) read its fingerprint in a second
   * statement, which sees a record committed by a concurrent batch that the INSERT waited for.
   */
  private async record(items: readonly NonceRecord[]): Promise<BatchOutcome<string>[]> {
    const now = this.clock.now();
    const inserted = await this.db.query<{ client_id: string; nonce: string; fingerprint: string; signed_day: Date }>(
      `WITH ${RELAXED_COMMIT}, x AS (
         SELECT DISTINCT ON (client_id, nonce, signed_day) client_id, nonce, fingerprint, expires_at, signed_day
           FROM unnest($1::text[], $2::text[], $3::text[], $4::timestamptz[], $6::timestamptz[])
                WITH ORDINALITY AS x(client_id, nonce, fingerprint, expires_at, signed_day, n)
          ORDER BY client_id, nonce, signed_day, n
       )
       INSERT INTO request_nonces AS r (client_id, nonce, fingerprint, expires_at, signed_day)
       SELECT client_id, nonce, fingerprint, expires_at, signed_day FROM x CROSS JOIN relaxed_commit ORDER BY client_id, nonce, signed_day
       ON CONFLICT (client_id, nonce, signed_day) DO UPDATE SET fingerprint = EXCLUDED.fingerprint, expires_at = EXCLUDED.expires_at
        WHERE r.expires_at <= $5
       RETURNING r.client_id, r.nonce, r.fingerprint, r.signed_day`,
      [items.map((i) => i.scope), items.map((i) => i.nonce), items.map((i) => i.fingerprint), items.map((i) => i.expiresAt), now, items.map((i) => i.signedDay)],
    );
    const key = (scope: string, nonce: string, day: Date) => `${scope}\n${nonce}\n${day.getTime()}`;
    const keyOf = (i: NonceRecord) => key(i.scope, i.nonce, i.signedDay);
    const firstOfKey = new Map<string, NonceRecord>();
    for (const i of items) if (!firstOfKey.has(keyOf(i))) firstOfKey.set(keyOf(i), i);
    // The item that recorded a key gets NEW; every other item of that key (later in the batch, or
    // whose key was recorded before) gets the fingerprint stored.
    const stored = new Map<string, string>();
    const winners = new Set<NonceRecord>();
    for (const row of inserted) {
      const k = key(row.client_id, row.nonce, new Date(row.signed_day));
      stored.set(k, row.fingerprint);
      winners.add(firstOfKey.get(k)!);
    }
    const missing = items.filter((i) => !stored.has(keyOf(i)));
    if (missing.length > 0) {
      const rows = await this.db.query<{ client_id: string; nonce: string; fingerprint: string; signed_day: Date }>(
        `SELECT r.client_id, r.nonce, r.fingerprint, r.signed_day FROM request_nonces r
           JOIN unnest($1::text[], $2::text[], $3::timestamptz[]) AS x(client_id, nonce, signed_day) USING (client_id, nonce, signed_day)`,
        [missing.map((i) => i.scope), missing.map((i) => i.nonce), missing.map((i) => i.signedDay)],
      );
      for (const row of rows) stored.set(key(row.client_id, row.nonce, new Date(row.signed_day)), row.fingerprint);
    }
    return items.map((i) => {
      if (winners.has(i)) return { ok: true, value: NEW };
      const fingerprint = stored.get(keyOf(i));
      // Gone between the two statements (purged as expired): the request may try again.
      if (fingerprint === undefined) return { ok: false, error: new Error('nonce record vanished between insert and read') };
      return { ok: true, value: fingerprint };
    });
  }
}

/** What the batch answers an item that recorded its nonce (a fingerprint is never empty). */
const NEW = '';

/**
 * The durable check after the fast store let a nonce through: the database's answer, and, when it
 * holds another fingerprint than the fast store (which had forgotten the nonce), that fingerprint
 * written back to the fast store so the next attempts are answered there. Database errors mean
 * "unavailable" (503: nothing is executed without its nonce recorded).
 */
async function confirmDurably(
  durable: DurableNonces | undefined,
  fast: NonceClaim,
  scope: string,
  nonce: string,
  fingerprint: string,
  ttlSeconds: number,
  signedAt: Date,
  repair: (stored: string) => Promise<unknown>,
): Promise<NonceClaim> {
  if (!durable || fast === 'conflict') return fast;
  let result;
  try {
    result = await durable.claim(scope, nonce, fingerprint, ttlSeconds, signedAt);
  } catch (err) {
    throw new NonceStoreUnavailableError(`nonce store unavailable: ${(err as Error).message}`);
  }
  if (result.claim === 'conflict') {
    // The fast store had forgotten the nonce: it gets back what the nonce was claimed with.
    await repair(result.fingerprint).catch(() => {});
    return 'conflict';
  }
  // Seen before with this fingerprint by either store: a byte-identical repeat.
  return fast === 'repeat' || result.claim === 'repeat' ? 'repeat' : 'claimed';
}

/** In-process store (single process, no REDIS_URL). Expired entries are swept as it is used. */
export class MemoryNonceStore implements NonceStore {
  private readonly entries = new Map<string, { fingerprint: string; expiresAt: number }>();
  private lastSweep = 0;

  constructor(
    private readonly clock: Clock,
    private readonly durable?: DurableNonces,
  ) {}

  async claim(scope: string, nonce: string, fingerprint: string, ttlSeconds: number, signedAt: Date): Promise<NonceClaim> {
    const fast = this.claimInMemory(scope, nonce, fingerprint, ttlSeconds);
    return confirmDurably(this.durable, fast, scope, nonce, fingerprint, ttlSeconds, signedAt, async (stored) =>
      this.entries.set(`${scope}\n${nonce}`, { fingerprint: stored, expiresAt: this.clock.now().getTime() + ttlSeconds * 1000 }),
    );
  }

  private claimInMemory(scope: string, nonce: string, fingerprint: string, ttlSeconds: number): NonceClaim {
    const now = this.clock.now().getTime();
    if (now - this.lastSweep > 10_000) {
      for (const [k, v] of this.entries) if (v.expiresAt <= now) this.entries.delete(k);
      this.lastSweep = now;
    }
    const key = `${scope}\n${nonce}`;
    const existing = this.entries.get(key);
    if (existing && existing.expiresAt > now) return existing.fingerprint === fingerprint ? 'repeat' : 'conflict';
    this.entries.set(key, { fingerprint, expiresAt: now + ttlSeconds * 1000 });
    return 'claimed';
  }
}

const CLAIM_LUA = `
local ok = redis.call('SET', KEYS[1], ARGV[1], 'NX', 'EX', tonumber(ARGV[2]))
if ok then return 'claimed' end
if redis.call('GET', KEYS[1]) == ARGV[1] then return 'repeat' end
return 'conflict'`;

/**
 * The claim, then — unless it conflicts — the rate-limit count of the same request (the script of
 * RedisFixedWindow). KEYS[1] nonce, KEYS[2] window counter; ARGV[1] fingerprint, ARGV[2] nonce
 * TTL, ARGV[3] counter TTL. Replies {claim, count}; count 0 when not counted.
 */
const CLAIM_AND_COUNT_LUA = `
local claim
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'EX', tonumber(ARGV[2])) then
  claim = 'claimed'
elseif redis.call('GET', KEYS[1]) == ARGV[1] then
  claim = 'repeat'
else
  return {'conflict', 0}
end
local n = redis.call('INCR', KEYS[2])
if n == 1 then redis.call('EXPIRE', KEYS[2], tonumber(ARGV[3])) end
return {claim, n}`;

type NonceRedis = Redis & {
  pixgateNonceClaim(key: string, fingerprint: string, ttlSeconds: string): Promise<string>;
  pixgateNonceClaimAndCount(nonceKey: string, windowKey: string, fingerprint: string, ttlSeconds: string, windowTtlSeconds: string): Promise<[string, number]>;
};

function asClaim(reply: unknown): NonceClaim {
  if (reply === 'claimed' || reply === 'repeat' || reply === 'conflict') return reply;
  throw new Error(`unexpected reply ${String(reply)}`);
}

/**
 * Shared store: one script call (SET NX EX, or compare) per claim, by EVALSHA, then the durable
 * record (DurableNonces) of a nonce it let through. Errors mean "unavailable".
 */
export class RedisNonceStore implements NonceStore {
  private readonly scripted: NonceRedis;

  constructor(
    readonly redis: Redis,
    private readonly durable?: DurableNonces,
  ) {
    if (typeof (redis as unknown as Record<string, unknown>).pixgateNonceClaim !== 'function') {
      redis.defineCommand('pixgateNonceClaim', { numberOfKeys: 1, lua: CLAIM_LUA });
      redis.defineCommand('pixgateNonceClaimAndCount', { numberOfKeys: 2, lua: CLAIM_AND_COUNT_LUA });
    }
    this.scripted = redis as NonceRedis;
  }

  async claim(scope: string, nonce: string, fingerprint: string, ttlSeconds: number, signedAt: Date): Promise<NonceClaim> {
    let fast: NonceClaim;
    try {
      fast = asClaim(await this.scripted.pixgateNonceClaim(`nonce:${scope}:${nonce}`, fingerprint, String(ttlSeconds)));
    } catch (err) {
      throw new NonceStoreUnavailableError(`nonce store unavailable: ${(err as Error).message}`);
    }
    return this.confirm(fast, scope, nonce, fingerprint, ttlSeconds, signedAt);
  }

  /** The durable record of a nonce Redis let through; a fingerprint Redis had forgotten is put back. */
  private confirm(fast: NonceClaim, scope: string, nonce: string, fingerprint: string, ttlSeconds: number, signedAt: Date): Promise<NonceClaim> {
    return confirmDurably(this.durable, fast, scope, nonce, fingerprint, ttlSeconds, signedAt, (stored) =>
      this.redis.set(`nonce:${scope}:${nonce}`, stored, 'EX', ttlSeconds),
    );
  }

  /**
   * `claim`, and when the nonce does not conflict the rate-limit hit of the same request in
   * `counter`'s window, in one round trip (both live in this Redis). A conflict is not counted,
   * exactly as when the limiter ran after the claim. Errors mean "unavailable" (both stores are
   * this Redis).
   */
  async claimAndHit(
    scope: string,
    nonce: string,
    fingerprint: string,
    ttlSeconds: number,
    signedAt: Date,
    counter: RedisFixedWindow,
    window: { key: string; limit: number; windowSeconds: number },
  ): Promise<{ claim: NonceClaim; hit: WindowHit | undefined }> {
    const w = counter.window(window.key, window.limit, window.windowSeconds);
    let fast: NonceClaim;
    let hit: WindowHit | undefined;
    try {
      const [claim, count] = await this.scripted.pixgateNonceClaimAndCount(
        `nonce:${scope}:${nonce}`,
        w.redisKey,
        fingerprint,
        String(ttlSeconds),
        String(w.ttlSeconds),
      );
      fast = asClaim(claim);
      hit = fast === 'conflict' ? undefined : w.hit(Number(count));
    } catch (err) {
      throw new NonceStoreUnavailableError(`nonce store unavailable: ${(err as Error).message}`);
    }
    return { claim: await this.confirm(fast, scope, nonce, fingerprint, ttlSeconds, signedAt), hit };
  }
}

/**
 * When the nonces and the rate-limit counters are the same Redis, the v2 pipeline claims the nonce
 * and counts the request in one round trip; otherwise (process memory, or two stores) undefined.
 */
export function combinedNonceAndRate(nonces: NonceStore, counter: FixedWindowCounter): { nonces: RedisNonceStore; counter: RedisFixedWindow } | undefined {
  return nonces instanceof RedisNonceStore && counter instanceof RedisFixedWindow && nonces.redis === counter.redis ? { nonces, counter } : undefined;
}
