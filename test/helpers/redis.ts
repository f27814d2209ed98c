import { randomBytes } from 'node:crypto';
import { Redis } from 'ioredis';

/** Redis variants: always in-memory stores; the real Redis of TEST_REDIS_URL too when it is set. */
export const REDIS_VARIANTS: ('memory' | 'redis')[] = process.env.TEST_REDIS_URL ? ['memory', 'redis'] : ['memory'];

/** A Redis connection whose keys live under a prefix of its own (deleted on close). */
export async function openTestRedis(): Promise<{ redis: Redis; close(): Promise<void> }> {
  const url = process.env.TEST_REDIS_URL;
  if (!url) throw new Error('TEST_REDIS_URL is not set');
  const prefix = `pixgate-test:${randomBytes(6).toString('hex')}:`;
  const redis = new Redis(url, { keyPrefix: prefix, maxRetriesPerRequest: 1, lazyConnect: true });
  await redis.connect();
  return {
    redis,
    async close() {
      const raw = new Redis(url, { lazyConnect: true });
      await raw.connect();
      let cursor = '0';
      do {
        const [next, keys] = await raw.scan(cursor, 'MATCH', `${prefix}*`, 'COUNT', 500);
        cursor = next;
        if (keys.length) await raw.del(...keys);
      } while (cursor !== '0');
      await raw.quit();
      await redis.quit();
    },
  };
}
