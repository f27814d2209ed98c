/**
 * The package root (`import { createServer } from 'pixgate'`): pixgate's programmatic API.
 * Importing it starts nothing — no port, no database, no ./data folder, no output; a server starts
 * only when `start()` is called (the `pixgate-server` bin and `npm start` run src/main.ts, which
 * adds signal handling and WEB_CONCURRENCY workers). The SDK is the separate package
 * `@pixgate/sdk` (docs/sdk.md). See README "Embedding pixgate".
 */
import type { Logger } from 'pino';
import { parseConfig, type Config } from './config.js';
import { startServer, type RunningServer } from './server.js';
import type { DemoCredentials } from './seed.js';

export { ConfigError, type AppEnv, type Config } from './config.js';
export type { DemoCredentials } from './seed.js';

export interface CreateServerOptions {
  /** The environment the configuration is read from (README's table of variables); default `process.env`. */
  env?: Record<string, string | undefined>;
  /** A pino logger; default one at LOG_LEVEL writing JSON lines to stdout. */
  log?: Logger;
  /** Where the generated admin token and the demo credentials are printed; default stdout. */
  print?: (text: string) => void;
  /** Seed the demo merchant in APP_ENV=local on an empty database (default true). */
  seed?: boolean;
  /** Run the background workers: rail simulator, webhooks, recovery, retention (default true). */
  workers?: boolean;
}

export interface StartedServer {
  /** The address it listens on, e.g. `http://127.0.0.1:8080` (PORT=0 picks a free port). */
  url: string;
  /** The demo merchant seeded by this start (APP_ENV=local on an empty database), else null. */
  demo: DemoCredentials | null;
}

export interface PixgateServer {
  /** The configuration parsed from `env` (secrets included: do not log it). */
  readonly config: Config;
  /** Migrates, seeds (local), listens and starts the workers. Once; a second call answers the same start. */
  start(): Promise<StartedServer>;
  /** Stops accepting, finishes in-flight requests, stops the workers and closes the database. */
  stop(): Promise<void>;
}

/**
 * A pixgate server, not started. The configuration is read now, so a bad value throws a
 * `ConfigError` here, before anything is opened.
 */
export function createServer(options: CreateServerOptions = {}): PixgateServer {
  const config = parseConfig(options.env ?? process.env);
  let running: Promise<RunningServer> | undefined;
  return {
    config,
    start() {
      running ??= startServer(config, {
        ...(options.log ? { log: options.log } : {}),
        ...(options.print ? { print: options.print } : {}),
        ...(options.seed === false ? { seed: false } : {}),
        ...(options.workers === false ? { workers: false } : {}),
      });
      return running.then(({ url, demo }) => ({ url, demo }));
    },
    async stop() {
      if (!running) return;
      const server = await running.catch(() => undefined);
      await server?.stop();
    },
  };
}
