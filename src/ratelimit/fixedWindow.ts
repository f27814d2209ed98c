import type { Redis } from 'ioredis';
import type { Clock } from '../lib/clock.js';

/**
 * Fixed-window counters: `hit` counts one request against `key` in the current window of
 * `windowSeconds` and says whether it is within `limit`. Windows are aligned to the Unix epoch, so
 * every process agrees on their boundaries.
 */
export interface WindowHit {
  allowed: boolean;
  limit: number;
  /** Requests left in this window after this one (never negative). */
  remaining: number;
  /** Unix seconds at which the window resets. */
  resetAt: number;
  /** Seconds until then (at least 1). */
  retryAfter: number;
}

export interface FixedWindowCounter {
  hit(key: string, limit: number, windowSeconds: number): Promise<WindowHit>;
}

function window(clock: Clock, windowSeconds: number) {
  const nowMs = clock.now().getTime();
  const start = Math.floor(nowMs / 1000 / windowSeconds) * windowSeconds;
  const resetAt = start + windowSeconds;
  return { start, resetAt, retryAfter: Math.max(1, Math.ceil(resetAt - nowMs / 1000)) };
}

function result(count: number, limit: number, w: ReturnType<typeof window>): WindowHit {
  return { allowed: count <= limit, limit, remaining: Math.max(0, limit - count), resetAt: w.resetAt, retryAfter: w.retryAfter };
}

export class MemoryFixedWindow implements FixedWindowCounter {
  private readonly counts = new Map<string, { windowStart: number; windowSeconds: number; count: number }>();
  private lastSweepSecond = 0;

  constructor(private readonly clock: Clock) {}

  async hit(key: string, limit: number, windowSeconds: number): Promise<WindowHit> {
    const w = window(this.clock, windowSeconds);
    const nowSecond = Math.floor(this.clock.now().getTime() / 1000);
    if (nowSecond - this.lastSweepSecond >= 10) {
      // Drop counters whose own window has ended (windows of different lengths share this map).
      for (const [k, v] of this.counts) if (v.windowStart + v.windowSeconds <= nowSecond) this.counts.delete(k);
      this.lastSweepSecond = nowSecond;
    }
    const id = `${windowSeconds}:${key}`;
    const entry = this.counts.get(id);
    const count = entry && entry.windowStart === w.start ? entry.count + 1 : 1;
    this.counts.set(id, { windowStart: w.start, windowSeconds, count });
    return result(count, limit, w);
  }
}

/** INCR, and the expiry set when the window's counter is created. KEYS[1] counter, ARGV[1] its TTL. */
export const WINDOW_HIT_LUA = `
local n = redis.call('INCR', KEYS[1])
if n == 1 then redis.call('EXPIRE', KEYS[1], tonumber(ARGV[1])) end
return n`;

type WindowRedis = Redis & { pixgateWindowHit(key: string, ttlSeconds: string): Promise<number> };

/** One of the current window's counters in Redis, for a script that counts in it. */
export interface RedisWindow {
  redisKey: string;
  ttlSeconds: number;
  /** The outcome once the script has counted `count` requests in it. */
  hit(count: number): WindowHit;
}

/**
 * Shared counters in Redis: one command per hit (a script run by EVALSHA: INCR, and EXPIRE on the
 * window's first request), where MULTI INCR EXPIRE EXEC sent four.
 */
export class RedisFixedWindow implements FixedWindowCounter {
  private readonly scripted: WindowRedis;

  constructor(
    readonly redis: Redis,
    private readonly clock: Clock,
  ) {
    if (typeof (redis as unknown as Record<string, unknown>).pixgateWindowHit !== 'function') {
      redis.defineCommand('pixgateWindowHit', { numberOfKeys: 1, lua: WINDOW_HIT_LUA });
    }
    this.scripted = redis as WindowRedis;
  }

  window(key: string, limit: number, windowSeconds: number): RedisWindow {
    const w = window(this.clock, windowSeconds);
    return { redisKey: `rl:${windowSeconds}:${w.start}:${key}`, ttlSeconds: windowSeconds + 5, hit: (count) => result(count, limit, w) };
  }

  async hit(key: string, limit: number, windowSeconds: number): Promise<WindowHit> {
    const w = this.window(key, limit, windowSeconds);
    const count = await this.scripted.pixgateWindowHit(w.redisKey, String(w.ttlSeconds));
    return w.hit(Number(count));
  }
}
