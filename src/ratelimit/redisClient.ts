import { Redis } from 'ioredis';
import type { Logger } from 'pino';

/**
 * The one Redis connection of a process (rate-limit windows, signature-v2 nonces). Redis here is a
 * fast shared counter, never a place to wait: a command that has not answered within
 * REDIS_COMMAND_TIMEOUT_MS fails, and a connection that has received nothing for that long while
 * commands are pending is destroyed and opened again. While it is down or reconnecting, commands
 * fail at once (no offline queue), so a frozen Redis or a partition without RST costs each request
 * at most one timeout and then behaves exactly like a stopped Redis: the rate limiter fails open,
 * the nonce store fails closed (503), /readyz says `degraded` (docs/decisions.md, issue 24).
 */
export function openRedis(url: string, options: { commandTimeoutMs: number; log: Logger }): Redis {
  const redis = new Redis(url, {
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
  });
  redis.on('error', (err: Error) => options.log.warn({ err: err.message }, 'redis error'));
  return redis;
}
