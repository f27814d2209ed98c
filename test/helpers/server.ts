import type { Redis } from 'ioredis';
import pino from 'pino';
import { parseConfig, type Config } from '../../src/config.js';
import type { Clock } from '../../src/lib/clock.js';
import type { ExternalPlugin } from '../../src/api/external.routes.js';
import { startServer, type RunningServer } from '../../src/server.js';
import { installContractCheck } from './contract.js';
import { openTestDatabase, type Backend, type TestDatabase } from './db.js';

export const TEST_ADMIN_TOKEN = 'test-admin-token-0123456789';

export interface TestServer extends RunningServer {
  backend: Backend;
  database: TestDatabase;
  /** fetch against the server with the admin bearer token. */
  admin(method: string, path: string, body?: unknown): Promise<{ status: number; body: any; headers: Headers }>;
  close(): Promise<void>;
}

export interface TestServerOptions {
  backend?: Backend;
  /** Run on this database instead of a fresh one (restart tests); close() leaves it open. */
  database?: TestDatabase;
  env?: Record<string, string>;
  redis?: Redis;
  clock?: Clock;
  workers?: boolean;
  seed?: boolean;
  externalPlugins?: readonly ExternalPlugin[];
}

/** Starts pixgate on a random port over a fresh database of the given backend. */
export async function startTestServer(options: TestServerOptions = {}): Promise<TestServer> {
  const database = options.database ?? (await openTestDatabase(options.backend ?? 'pglite'));
  const backend = database.backend;
  // APP_ENV=production requires REDIS_URL; tests of production behaviour that run on the
  // in-memory stores satisfy the rule with a placeholder and then drop it (no Redis is opened).
  const placeholderRedis = options.env?.APP_ENV === 'production' && options.env.REDIS_URL === undefined && options.env.REDIS_SENTINELS === undefined;
  const parsed: Config = parseConfig({
    PORT: '0',
    HOST: '127.0.0.1',
    ADMIN_TOKEN: TEST_ADMIN_TOKEN,
    LOG_LEVEL: 'silent',
    ...options.env,
    ...(placeholderRedis ? { REDIS_URL: 'redis://placeholder.invalid:6379' } : {}),
  });
  const config: Config = placeholderRedis ? { ...parsed, redisUrl: undefined } : parsed;
  const server = await startServer(config, {
    db: database.db,
    ownsDatabase: false,
    log: pino({ level: process.env.TEST_LOG_LEVEL ?? 'silent' }),
    print: () => {},
    seed: options.seed ?? false,
    workers: options.workers ?? true,
    onApp: installContractCheck,
    ...(options.redis ? { redis: options.redis } : {}),
    ...(options.clock ? { clock: options.clock } : {}),
    ...(options.externalPlugins ? { externalPlugins: options.externalPlugins } : {}),
  });
  const admin = async (method: string, path: string, body?: unknown) => {
    const res = await fetch(`${server.url}/api/admin${path}`, {
      method,
      headers: {
        authorization: `Bearer ${TEST_ADMIN_TOKEN}`,
        ...(body !== undefined ? { 'content-type': 'application/json' } : {}),
      },
      ...(body !== undefined ? { body: typeof body === 'string' ? body : JSON.stringify(body) } : {}),
    });
    const text = await res.text();
    return { status: res.status, body: text ? JSON.parse(text) : null, headers: res.headers };
  };
  return {
    ...server,
    backend,
    database,
    admin,
    async close() {
      await server.stop();
      if (!options.database) await database.close();
    },
  };
}
