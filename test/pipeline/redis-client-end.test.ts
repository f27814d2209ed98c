import pino from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import type { Redis } from 'ioredis';
import { closeRedis, openRedis } from '../../src/ratelimit/redisClient.js';

/**
 * Issue 25 (HA run: after a Redis failover by Sentinel, one pixgate node answered 503 "Replay
 * protection is unavailable" to every v2 request until the end of the run). ioredis ends a client
 * for good — status `end`, every command "Connection is closed." — when its connector is
 * disconnected while it connects again; with Sentinel, the failover detector of the lost connection
 * does exactly that on the sentinels' +switch-master. The client pixgate opens connects again.
 *
 * The detector's move is made here by hand, at the moment it hurts: the connection is lost and the
 * client starts connecting again.
 */
const url = process.env.TEST_REDIS_URL;

describe.runIf(url)('the Redis client after ioredis ended it', () => {
  let redis: Redis | undefined;
  afterEach(async () => {
    if (redis) await closeRedis(redis);
  });

  it('connects again and answers commands', async () => {
    redis = openRedis(url!, { commandTimeoutMs: 1000, log: pino({ level: 'silent' }) });
    await redis.connect();
    expect(await redis.ping()).toBe('PONG');
    const client = redis;
    const ended = new Promise<void>((resolve) => client.once('end', () => resolve()));
    // What the failover detector does (SentinelConnector → AbstractConnector.disconnect), while
    // the client reconnects after losing its connection.
    client.once('connecting', () => (client as unknown as { connector: { disconnect(): void } }).connector.disconnect());
    client.disconnect(true);
    await ended;
    await expect(client.ping()).rejects.toThrow('Connection is closed.');

    let answer: string | undefined;
    for (let i = 0; i < 100 && answer === undefined; i++) {
      answer = await client.ping().catch(() => undefined);
      if (answer === undefined) await new Promise((r) => setTimeout(r, 50));
    }
    expect(answer).toBe('PONG');
  });

  it('a client closed on purpose stays closed', async () => {
    const client = openRedis(url!, { commandTimeoutMs: 1000, log: pino({ level: 'silent' }) });
    await client.connect();
    await closeRedis(client);
    await new Promise((r) => setTimeout(r, 1000));
    expect(client.status).toBe('end');
  });
});
