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

/** Shared counters in Redis: one round trip (MULTI INCR + EXPIRE) per hit. */
export class RedisFixedWindow implements FixedWindowCounter {
  constructor(
    private readonly redis: Redis,
    private readonly clock: Clock,
  ) {}

  async hit(key: string, limit: number, windowSeconds: number): Promise<WindowHit> {
    const w = window(this.clock, windowSeconds);
    const redisKey = `rl:${windowSeconds}:${w.start}:${key}`;
    const replies = await this.redis.multi().incr(redisKey).expire(redisKey, windowSeconds + 5).exec();
    const [err, count] = replies?.[0] ?? [new Error('no reply'), 0];
    if (err) throw err;
    return result(Number(count), limit, w);
  }
}
