import type { Redis } from 'ioredis';
import type { Clock } from '../lib/clock.js';
import { RedisFixedWindow, type FixedWindowCounter, type WindowHit } from '../ratelimit/fixedWindow.js';

/**
 * Replay protection for signature v2. A nonce is claimed atomically with a fingerprint of what it
 * signed; claiming it again with the same fingerprint is a byte-identical repeat (allowed through
 * to the idempotency stage), with another fingerprint a replay attack (409).
 */
export type NonceClaim = 'claimed' | 'repeat' | 'conflict';

export interface NonceStore {
  claim(scope: string, nonce: string, fingerprint: string, ttlSeconds: number): Promise<NonceClaim>;
}

export class NonceStoreUnavailableError extends Error {
  override name = 'NonceStoreUnavailableError';
}

/** In-process store (single process, no REDIS_URL). Expired entries are swept as it is used. */
export class MemoryNonceStore implements NonceStore {
  private readonly entries = new Map<string, { fingerprint: string; expiresAt: number }>();
  private lastSweep = 0;

  constructor(private readonly clock: Clock) {}

  async claim(scope: string, nonce: string, fingerprint: string, ttlSeconds: number): Promise<NonceClaim> {
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

/** Shared store: one script call (SET NX EX, or compare) per claim, by EVALSHA. Errors mean "unavailable". */
export class RedisNonceStore implements NonceStore {
  private readonly scripted: NonceRedis;

  constructor(readonly redis: Redis) {
    if (typeof (redis as unknown as Record<string, unknown>).pixgateNonceClaim !== 'function') {
      redis.defineCommand('pixgateNonceClaim', { numberOfKeys: 1, lua: CLAIM_LUA });
      redis.defineCommand('pixgateNonceClaimAndCount', { numberOfKeys: 2, lua: CLAIM_AND_COUNT_LUA });
    }
    this.scripted = redis as NonceRedis;
  }

  async claim(scope: string, nonce: string, fingerprint: string, ttlSeconds: number): Promise<NonceClaim> {
    try {
      return asClaim(await this.scripted.pixgateNonceClaim(`nonce:${scope}:${nonce}`, fingerprint, String(ttlSeconds)));
    } catch (err) {
      throw new NonceStoreUnavailableError(`nonce store unavailable: ${(err as Error).message}`);
    }
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
    counter: RedisFixedWindow,
    window: { key: string; limit: number; windowSeconds: number },
  ): Promise<{ claim: NonceClaim; hit: WindowHit | undefined }> {
    const w = counter.window(window.key, window.limit, window.windowSeconds);
    try {
      const [claim, count] = await this.scripted.pixgateNonceClaimAndCount(
        `nonce:${scope}:${nonce}`,
        w.redisKey,
        fingerprint,
        String(ttlSeconds),
        String(w.ttlSeconds),
      );
      return { claim: asClaim(claim), hit: claim === 'conflict' ? undefined : w.hit(Number(count)) };
    } catch (err) {
      throw new NonceStoreUnavailableError(`nonce store unavailable: ${(err as Error).message}`);
    }
  }
}

/**
 * When the nonces and the rate-limit counters are the same Redis, the v2 pipeline claims the nonce
 * and counts the request in one round trip; otherwise (process memory, or two stores) undefined.
 */
export function combinedNonceAndRate(nonces: NonceStore, counter: FixedWindowCounter): { nonces: RedisNonceStore; counter: RedisFixedWindow } | undefined {
  return nonces instanceof RedisNonceStore && counter instanceof RedisFixedWindow && nonces.redis === counter.redis ? { nonces, counter } : undefined;
}
