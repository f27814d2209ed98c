#!/usr/bin/env node
import cluster from 'node:cluster';
import pino from 'pino';
import { ConfigError, parseConfig, type Config } from './config.js';
import { migrate } from './db/migrate.js';
import { openDatabase } from './db/open.js';
import { loggerOptions, prettyDestination } from './logger.js';
import { SHUTDOWN_TIMEOUT_MS, startServer } from './server.js';
import { clusterCollector, startMetricsListener } from './metrics/listener.js';
import { BACKGROUND_ENV, isWakeMessage } from './lib/clusterWakes.js';

/**
 * Entry point. One process by default; with WEB_CONCURRENCY > 1 the primary migrates the database
 * once and forks that many workers, each serving HTTP; the first also runs the background loops
 * that batch across the cluster (the others wake it through the primary), every worker the other
 * background workers, the webhook sender among them (they claim work with SKIP LOCKED, so they never
 * double-process).
 */
async function main() {
  let config: Config;
  try {
    config = parseConfig(process.env);
  } catch (err) {
    if (err instanceof ConfigError) {
      process.stderr.write(`pixgate: configuration error: ${err.message}\n`);
      process.exit(78); // EX_CONFIG
    }
    throw err;
  }
  // Local mode on a terminal: readable lines; otherwise (pipes, files, production) JSON lines.
  const log = config.appEnv === 'local' && process.stdout.isTTY ? pino(loggerOptions(config.logLevel), prettyDestination()) : pino(loggerOptions(config.logLevel));

  if (config.webConcurrency > 1 && cluster.isPrimary) await runClusterPrimary(config, log);
  else await runSingleServer(config, log);
}

/** The cluster primary: migrates once, forks the HTTP workers, relays wake-ups, sums metrics. */
async function runClusterPrimary(config: Config, log: pino.Logger): Promise<void> {
  const db = await openDatabase(config);
  await migrate(db);
  await db.close();
  log.info({ workers: config.webConcurrency }, 'starting HTTP workers');
  // Local mode seeds a demo merchant on an empty database: only the first worker may, or two
  // workers race, seed twice and one dies on the second registration of the demo PIX key.
  // The first one also runs the background loops for the cluster; the others send it their
  // wake-ups through this process (src/lib/clusterWakes.ts).
  let background = cluster.fork({ [BACKGROUND_ENV]: '1' });
  for (let i = 1; i < config.webConcurrency; i++) cluster.fork({ PIXGATE_SEED_DEMO: '0' });
  cluster.on('message', (worker, message) => {
    // (A channel that closed meanwhile answers the callback, not an 'error' event.)
    if (isWakeMessage(message) && worker !== background && background.isConnected()) background.send(message, () => {});
  });
  if (config.metricsPort !== undefined) {
    await startMetricsListener(config.metricsPort, config.metricsHost, clusterCollector());
    log.info({ port: config.metricsPort, host: config.metricsHost }, 'metrics listener ready (sum over workers)');
  }
  let shuttingDown = false;
  cluster.on('exit', (worker, code, signal) => {
    if (shuttingDown) return;
    log.error({ pid: worker.process.pid, code, signal }, 'worker died; starting another');
    if (worker === background) background = cluster.fork({ PIXGATE_SEED_DEMO: '0', [BACKGROUND_ENV]: '1' });
    else cluster.fork({ PIXGATE_SEED_DEMO: '0' });
  });
  const shutdown = () => {
    shuttingDown = true;
    for (const w of Object.values(cluster.workers ?? {})) w?.process.kill('SIGTERM');
    setTimeout(() => process.exit(1), SHUTDOWN_TIMEOUT_MS + 1000).unref();
    cluster.on('exit', () => {
      if (Object.keys(cluster.workers ?? {}).length === 0) process.exit(0);
    });
  };
  process.once('SIGTERM', shutdown);
  process.once('SIGINT', shutdown);
}

/** One server process (alone, or a cluster worker) that stops gracefully on SIGTERM/SIGINT. */
async function runSingleServer(config: Config, log: pino.Logger): Promise<void> {
  const server = await startServer(config, { log, ...(process.env.PIXGATE_SEED_DEMO === '0' ? { seed: false } : {}) });
  const shutdown = (signal: string) => {
    log.info({ signal }, 'signal received');
    setTimeout(() => {
      log.error('shutdown took longer than 10 s; exiting');
      process.exit(1);
    }, SHUTDOWN_TIMEOUT_MS).unref();
    server.stop().then(
      () => process.exit(0),
      (err) => {
        log.error({ err }, 'shutdown failed');
        process.exit(1);
      },
    );
  };
  process.once('SIGTERM', () => shutdown('SIGTERM'));
  process.once('SIGINT', () => shutdown('SIGINT'));
}

main().catch((err) => {
  if (err instanceof ConfigError) {
    process.stderr.write(`pixgate: configuration error: ${err.message}\n`);
    process.exit(78); // EX_CONFIG (e.g. the role's timeouts behind a pooler, found at start)
  }
  process.stderr.write(`pixgate: failed to start: ${(err as Error).message}\n`);
  process.exit(1);
});
