import type { Redis } from 'ioredis';
import type { Clock } from '../lib/clock.js';

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

const CLAIM_SCRIPT = `
local ok = redis.call('SET', KEYS[1], ARGV[1], 'NX', 'EX', tonumber(ARGV[2]))
if ok then return 'claimed' end
if redis.call('GET', KEYS[1]) == ARGV[1] then return 'repeat' end
return 'conflict'`;

/** Shared store: one Lua call (SET NX EX, or compare) per claim. Errors mean "unavailable". */
export class RedisNonceStore implements NonceStore {
  constructor(private readonly redis: Redis) {}

  async claim(scope: string, nonce: string, fingerprint: string, ttlSeconds: number): Promise<NonceClaim> {
    try {
      const result = (await this.redis.eval(CLAIM_SCRIPT, 1, `nonce:${scope}:${nonce}`, fingerprint, String(ttlSeconds))) as string;
      if (result === 'claimed' || result === 'repeat' || result === 'conflict') return result;
      throw new Error(`unexpected reply ${String(result)}`);
    } catch (err) {
      throw new NonceStoreUnavailableError(`nonce store unavailable: ${(err as Error).message}`);
    }
  }
}
