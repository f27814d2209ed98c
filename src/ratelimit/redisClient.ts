import { Redis, type RedisOptions } from 'ioredis';
import type { Logger } from 'pino';
import type { RedisSentinelConfig } from '../config.js';

/** Where the Redis is: one URL (REDIS_URL), or the sentinels that name its master (REDIS_SENTINELS). */
export type RedisTarget = { url: string } | { sentinel: RedisSentinelConfig };

/**
 * The one Redis connection of a process (rate-limit windows, signature-v2 nonces). Redis here is a
 * fast shared counter, never a place to wait: a command that has not answered within
 * REDIS_COMMAND_TIMEOUT_MS fails, and a connection that has received nothing for that long while
 * commands are pending is destroyed and opened again. While it is down or reconnecting, commands
 * fail at once (no offline queue), so a frozen Redis or a partition without RST costs each request
 * at most one timeout and then behaves exactly like a stopped Redis: the rate limiter fails open,
 * the nonce store fails closed (503), /readyz says `degraded` (docs/decisions.md, issue 24).
 *
 * With Sentinel, each (re)connection asks the sentinels, in turn, for the current master and
 * checks that it is one (ROLE); the sentinels' `+switch-master` is followed at once
 * (failoverDetector), and a master demoted under an open connection (READONLY on a write) makes
 * the connection reconnect, so it finds the new master. Commands issued during the switch fail
 * like any other Redis outage (the nonce store answers 503; nonces themselves are durable in the
 * database, src/auth/nonceStore.ts).
 */
export function openRedis(target: RedisTarget | string, options: { commandTimeoutMs: number; log: Logger }): Redis {
  const common: RedisOptions = {
    lazyConnect: true,
    enableOfflineQueue: false,
    maxRetriesPerRequest: 1,
    commandTimeout: options.commandTimeoutMs,
    socketTimeout: options.commandTimeoutMs,
    connectTimeout: Math.max(1_000, options.commandTimeoutMs),
    retryStrategy: (times) => Math.min(times * 100, 2_000),
    // Auto-pipelining: the commands of one event-loop turn (rate-limit and nonce scripts of many
    // requests) leave in one write to the socket, which dominated the pipeline's profile.
    enableAutoPipelining: true,
  };
  const t = typeof target === 'string' ? { url: target } : target;
  let redis: Redis;
  if ('url' in t) {
    redis = new Redis(t.url, common);
  } else {
    const s = t.sentinel;
    redis = new Redis({
      ...common,
      sentinels: s.sentinels,
      name: s.masterName,
      role: 'master',
      ...(s.password !== undefined ? { password: s.password } : {}),
      ...(s.sentinelPassword !== undefined ? { sentinelPassword: s.sentinelPassword } : {}),
      sentinelCommandTimeout: options.commandTimeoutMs,
      // Each round over every sentinel that found no master is tried again, forever, at most every 2 s.
      sentinelRetryStrategy: (times) => Math.min(times * 100, 2_000),
      failoverDetector: true,
      reconnectOnError: (err) => err.message.startsWith('READONLY'),
    });
  }
  redis.on('error', (err: Error) => options.log.warn({ err: err.message }, 'redis error'));
  // ioredis ends a client for good ('end': every command "Connection is closed.") when its connector
  // is disconnected while connecting. With Sentinel that happens in a failover: the failover
  // detector of the connection lost with the old master stays subscribed until a new connection
  // is made, and the sentinels' +switch-master makes it disconnect the connector in the middle of
  // the reconnection (the HA run: one node answered 503 to every v2 request from then on). A client
  // not closed on purpose is connected again.
  redis.on('end', () => {
    if (closedOnPurpose.has(redis)) return;
    options.log.warn('redis client ended by the library; connecting again');
    setTimeout(() => {
      if (!closedOnPurpose.has(redis) && redis.status === 'end') redis.connect().catch(() => {});
    }, RECONNECT_AFTER_END_MS).unref();
  });
  return redis;
}

const RECONNECT_AFTER_END_MS = 500;
const closedOnPurpose = new WeakSet<Redis>();

/** Closes a client of openRedis for good: `quit` (pending replies first), or at once. */
export async function closeRedis(redis: Redis, how: 'quit' | 'now' = 'quit'): Promise<void> {
  closedOnPurpose.add(redis);
  if (how === 'now') redis.disconnect();
  else await redis.quit().catch(() => redis.disconnect());
}
