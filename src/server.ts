import type { FastifyInstance } from 'fastify';
import type { Redis } from 'ioredis';
import pino, { type Logger } from 'pino';
import { buildApp } from './app.js';
import { redisConfigured, type Config } from './config.js';
import type { AppContext } from './context.js';
import { wakeLocal, type Database } from './db/db.js';
import { limitConcurrency } from './db/limit.js';
import { migrate } from './db/migrate.js';
import { isLockTimeout } from './db/partitions.js';
import { ensurePartitions } from './retention/partitions.js';
import { retentionWorker } from './retention/retention.js';
import { checkPooledSettings, openDatabase, readReplicaOptions } from './db/open.js';
import { openReadReplica } from './db/replica.js';
import { monotonicNow, systemClock, type Clock } from './lib/clock.js';
import { readOffset, SandboxClock } from './lib/sandboxClock.js';
import { loggerOptions } from './logger.js';
import { SimulatedRail } from './rail/sim/simulatedRail.js';
import { withDeadline } from './rail/rail.js';
import { instrumentRail } from './rail/instrumented.js';
import { CredentialCache } from './auth/credentialCache.js';
import { DurableNonces, MemoryNonceStore, RedisNonceStore } from './auth/nonceStore.js';
import { IdempotencyStore } from './external/idempotency.js';
import type { ExternalPlugin } from './api/external.routes.js';
import { periodicWorker } from './lib/periodic.js';
import { graceWorker } from './auth/keyLifecycle.js';
import { chargeWorkers } from './pix/cashin/charges.js';
import { MemoryFixedWindow, RedisFixedWindow } from './ratelimit/fixedWindow.js';
import { closeRedis, openRedis } from './ratelimit/redisClient.js';
import { seedDemo, type DemoCredentials } from './seed.js';
import { keepsLocalCredentials, localCredentialsPath, readLocalCredentials, storedDemo, writeLocalCredentials } from './localCredentials.js';
import { railNotificationHandler } from './pix/railEvents.js';
import { pixWorkers } from './pix/recovery.js';
import { webhookSender, webhookWorkers } from './webhooks/workers.js';
import { batchPixNotices } from './apiPix/pixWebhookBatches.js';
import { WAKE } from './webhooks/repository.js';
import { runsBackgroundLoops, wakeForwarder, wakeReceiver } from './lib/clusterWakes.js';
import { Metrics } from './metrics/metrics.js';
import { shareWithClusterPrimary, startMetricsListener } from './metrics/listener.js';
import cluster from 'node:cluster';

export const INSTITUTION_NAME = 'pixgate';
/** Graceful shutdown must finish within this; then the process exits regardless. */
export const SHUTDOWN_TIMEOUT_MS = 10_000;

export interface StartOptions {
  log?: Logger;
  /** A database opened by the caller (tests); closed on stop only if `ownsDatabase`. */
  db?: Database;
  ownsDatabase?: boolean;
  redis?: Redis;
  clock?: Clock;
  /** Start the background workers (default true). */
  workers?: boolean;
  /** Seed the demo merchant in APP_ENV=local on an empty database (default true). */
  seed?: boolean;
  /** Print credentials and the admin token to stdout (default true). */
  print?: (text: string) => void;
  /** Extra routes mounted behind the external pipeline (tests). */
  externalPlugins?: readonly ExternalPlugin[];
  /** Called on the root Fastify instance before routes are registered (tests observe every exchange). */
  onApp?: (app: FastifyInstance) => void;
}

export interface RunningServer {
  app: FastifyInstance;
  ctx: AppContext;
  url: string;
  demo: DemoCredentials | null;
  stop(): Promise<void>;
}

/** Builds the context from config, migrates, seeds, listens and starts the workers. */
export async function startServer(config: Config, options: StartOptions = {}): Promise<RunningServer> {
  const log = options.log ?? pino(loggerOptions(config.logLevel));
  const db = options.db ?? (await openDatabase(config));
  // Local mode on the embedded database: a generated admin token survives restarts (data folder).
  const keepLocal = keepsLocalCredentials(config, options.db !== undefined);
  const stored = keepLocal ? readLocalCredentials(config.dataDir) : undefined;
  const tokenKept = keepLocal && config.adminTokenGenerated && typeof stored?.admin_token === 'string' && stored.admin_token.length >= 16;
  if (tokenKept) config = { ...config, adminToken: stored!.admin_token! };
  const ownsDatabase = options.ownsDatabase ?? options.db === undefined;
  const ownsRedis = options.redis === undefined && redisConfigured(config);
  const redis = await prepareStorage(config, db, options.redis, { ownsDatabase, ownsRedis, log });

  const clock = await businessClock(config, db, options.clock ?? systemClock).catch(async (err: unknown) => {
    if (ownsDatabase) await db.close();
    if (ownsRedis && redis) await closeRedis(redis, 'now');
    throw err;
  });
  const { ctx, simulator } = await buildContext(config, db, redis, clock, log);
  // Before the first request: a key changed by any process from now on is dropped from the cache.
  await ctx.credentials.listen(db);
  addWorkers(ctx, simulator);

  let demo: DemoCredentials | null = null;
  if (config.appEnv === 'local' && options.seed !== false) {
    demo = await seedDemo(ctx);
  }

  const app = await buildApp(ctx, { externalPlugins: options.externalPlugins ?? [], ...(options.onApp ? { onApp: options.onApp } : {}) });
  await app.listen({ port: config.port, host: config.host });
  const url = listeningUrl(app, config);
  log.info({ url, app_env: config.appEnv, database: db.dialect, redis: redis ? 'on' : 'off' }, `pixgate listening on ${url}`);

  announceCredentials(config, { url, demo, keepLocal, tokenKept, stored, log, print: options.print ?? ((text: string) => process.stdout.write(text)) });
  const metricsListener = await serveMetrics(ctx);

  if (options.workers !== false) for (const w of ctx.workers) w.start();

  let stopping: Promise<void> | undefined;
  const stop = () =>
    (stopping ??= (async () => {
      log.info('shutting down');
      await app.close(); // stops accepting, waits for in-flight requests
      if (metricsListener) await new Promise((r) => metricsListener!.close(r));
      await Promise.allSettled(ctx.workers.map((w) => w.stop()));
      await ctx.credentials.close();
      if (ctx.clock instanceof SandboxClock) await ctx.clock.close();
      if (ownsRedis && redis) await closeRedis(redis);
      if (ctx.readDb !== db) await ctx.readDb.close();
      if (ownsDatabase) await db.close();
      log.info('stopped');
    })());

  return { app, ctx, url, demo, stop };
}

/** Checks the pool settings, migrates and connects an owned Redis; on failure closes what it owns. */
async function prepareStorage(
  config: Config,
  db: Database,
  given: Redis | undefined,
  own: { ownsDatabase: boolean; ownsRedis: boolean; log: Logger },
): Promise<Redis | undefined> {
  let redis = given;
  try {
    await checkPooledSettings(db, config, own.log);
    const applied = await migrate(db);
    if (applied.length) own.log.info({ migrations: applied }, 'database migrated');
    // The coming days' partitions (outbox, deliveries, attempts, nonces, rail inbox, idempotency
    // answers) before the first request, not beside it: creating one
    // locks its parent table, and an insert that waits behind that lock on a loaded machine can
    // pass a short statement_timeout. Busy (another process is at it): the retention worker retries.
    const partitions = await ensurePartitions(db).catch((err: unknown) => {
      if (!isLockTimeout(err)) throw err;
      return { created: [] as string[], skipped: [] as string[] };
    });
    if (partitions.created.length > 0) own.log.info({ partitions: partitions.created }, 'partitions created');
    if (own.ownsRedis) {
      const target = config.redisSentinel ? { sentinel: config.redisSentinel } : { url: config.redisUrl! };
      redis = openRedis(target, { commandTimeoutMs: config.redisCommandTimeoutMs, log: own.log });
      await redis.connect();
    }
  } catch (err) {
    if (own.ownsDatabase) await db.close();
    if (redis && own.ownsRedis) await closeRedis(redis, 'now');
    else redis?.disconnect();
    throw err;
  }
  return redis;
}

/**
 * The business clock (docs/sandbox-clock.md): outside production the wall clock plus the sandbox
 * offset, read now and followed through its notification before the first request. Production runs
 * on the wall clock and refuses a database whose offset is not 0 (an installation that ran as a
 * sandbox: its deadlines lie in simulated time, and SQL's business_now() would keep following it).
 */
async function businessClock(config: Config, db: Database, wall: Clock): Promise<Clock> {
  if (config.appEnv === 'production') {
    const offset = await readOffset(db);
    if (offset !== 0) {
      throw new Error(`the sandbox clock of this database is ${offset} s ahead; APP_ENV=production refuses it (use a database that never ran as a sandbox)`);
    }
    return wall;
  }
  const clock = new SandboxClock(wall);
  await clock.follow(db);
  return clock;
}

/** The AppContext (metrics, the simulated rail, stores, caches) and the simulator behind its rail. */
async function buildContext(
  config: Config,
  db: Database,
  redis: Redis | undefined,
  clock: Clock,
  log: Logger,
): Promise<{ ctx: AppContext; simulator: SimulatedRail }> {
  // Security windows stay on real time; every business deadline follows `clock`.
  const wallClock = clock instanceof SandboxClock ? clock.wall() : clock;
  const metrics = new Metrics();
  metrics.attachDatabase(db);
  if (redis) metrics.attachRedis(redis);
  const simulator = new SimulatedRail({
    db: db.counted('rail'), // the simulated bank's statements count apart from pixgate's own
    institutionIspb: config.institutionIspb,
    institutionName: INSTITUTION_NAME,
    clock,
    log,
    settlementMs: config.simSettlementMs,
    protectionMs: config.simProtectionMs,
    seed: config.simSeed,
    observeBatch: (name) => metrics.batchObserver(name),
  });
  // Every v2 nonce the fast store lets through is also recorded in the database (issue 25).
  const durableNonces = new DurableNonces(db, wallClock, { observeBatch: (name) => metrics.batchObserver(name) });
  const readDb = config.db.readUrl !== undefined && db.dialect === 'postgres' ? await openReadReplica(db, readReplicaOptions(config)) : db;
  const ctx: AppContext = {
    config,
    db,
    readDb,
    redis,
    clock,
    wallClock,
    log,
    rail: instrumentRail(withDeadline(simulator, config.railTimeoutMs), metrics),
    institutionName: INSTITUTION_NAME,
    workers: [],
    rateCounter: redis ? new RedisFixedWindow(redis, wallClock) : new MemoryFixedWindow(wallClock),
    nonces: redis ? new RedisNonceStore(redis, durableNonces) : new MemoryNonceStore(wallClock, durableNonces),
    idempotency: new IdempotencyStore(db, clock, { leaseMs: config.idempotencyLeaseMs, observeBatch: (name) => metrics.batchObserver(name) }),
    credentials: new CredentialCache(config.authCacheTtlMs),
    metrics,
  };
  return { ctx, simulator };
}

/** Registers the background workers on ctx.workers (started later) and wires the rail's notifications. */
function addWorkers(ctx: AppContext, simulator: SimulatedRail): void {
  const { config, db, log } = ctx;
  // Background work runs on a view of the database limited to DATABASE_BACKGROUND_POOL_MAX
  // connections at once, so it can never take the whole pool from requests (src/db/limit.ts).
  const background: AppContext = { ...ctx, db: limitConcurrency(db.counted('background'), config.db.backgroundPoolMax) };
  ctx.workers.push(retentionWorker(background));
  ctx.workers.push(...chargeWorkers(background));
  // The rail delivers its outcomes to the PIX domain; its own loops (the simulator's engine) and
  // the PIX recovery worker run with the other background workers.
  ctx.rail.onNotification(railNotificationHandler(background));
  // An advance of the sandbox clock makes the simulator's due work due now (its other loops wake
  // on the clock's notification: src/lib/sandboxClock.ts).
  if (ctx.clock instanceof SandboxClock) ctx.clock.onAdvance(() => simulator.wake(monotonicNow()));
  // With WEB_CONCURRENCY > 1 one worker runs the loops that batch across the cluster (the engine,
  // the PIX recovery, the webhook dispatcher); the others send it their wake-ups
  // (src/lib/clusterWakes.ts). Every process sends webhook deliveries.
  const backgroundLoops = runsBackgroundLoops();
  if (backgroundLoops) ctx.workers.push(...ctx.rail.workers(), ...pixWorkers(background), ...webhookWorkers(background, { beforeDispatch: () => batchPixNotices(background.db) }), graceWorker(background));
  else ctx.workers.push(wakeForwarder(db, simulator, [WAKE.outbox]), webhookSender(background));
  if (backgroundLoops && cluster.isWorker) ctx.workers.push(wakeReceiver((name) => wakeLocal(db, name), simulator));
  log.info(
    {
      sim_seed: config.simSeed,
      sim_seed_source: config.simSeedGenerated ? 'random' : 'SIM_SEED',
      settlement_ms: config.simSettlementMs,
      protection_ms: config.simProtectionMs,
      // Whether this process runs the cluster's background loops (false: it wakes the one that does).
      background_loops: backgroundLoops,
    },
    `rail simulator ready (SIM_SEED=${config.simSeed})`,
  );
}

/** The URL a client on this machine reaches the listening server at. */
function listeningUrl(app: FastifyInstance, config: Config): string {
  const address = app.server.address();
  const port = typeof address === 'object' && address ? address.port : config.port;
  const scheme = config.tls ? 'https' : 'http';
  const hostForUrl = config.host.includes(':') ? `[${config.host === '::' ? '::1' : config.host}]` : config.host === '0.0.0.0' ? '127.0.0.1' : config.host;
  return `${scheme}://${hostForUrl}:${port}`;
}

interface Announcement {
  url: string;
  demo: DemoCredentials | null;
  keepLocal: boolean;
  tokenKept: boolean;
  stored: ReturnType<typeof readLocalCredentials> | undefined;
  log: Logger;
  print: (text: string) => void;
}

/** Keeps the local credentials (local mode) and prints the admin token and the demo merchant. */
function announceCredentials(config: Config, a: Announcement): void {
  const { url, demo, keepLocal, tokenKept, stored, log, print } = a;
  const credentialsFile = localCredentialsPath(config.dataDir);
  if (keepLocal) {
    try {
      writeLocalCredentials(config.dataDir, {
        url,
        ...(config.adminTokenGenerated ? { admin_token: config.adminToken } : {}),
        ...(demo ? { demo: storedDemo(demo) } : stored?.demo ? { demo: stored.demo } : {}),
      });
    } catch (err) {
      log.warn({ err: (err as Error).message, file: credentialsFile }, 'local credentials could not be kept');
    }
  }
  if (config.adminTokenGenerated) {
    const origin = tokenKept ? `kept from an earlier start in ${credentialsFile}` : keepLocal ? `generated, kept in ${credentialsFile}` : 'generated for this run';
    print(`\nADMIN_TOKEN (${origin}; set ADMIN_TOKEN to choose one): ${config.adminToken}\n`);
  }
  if (!demo && keepLocal && stored?.demo) {
    const d = stored.demo;
    print(
      [
        '',
        `Demo merchant (from ${credentialsFile}; \`npm run pixgate -- local-credentials\` shows it again):`,
        `  merchant_id ${d.merchant_id}, account_id ${d.account_id}, client_id ${d.client_id}, client_secret ${d.client_secret}`,
        '',
      ].join('\n') + '\n',
    );
  }
  if (demo) {
    print(
      [
        '',
        keepLocal ? `Demo merchant seeded (kept in ${credentialsFile}):` : 'Demo merchant seeded (shown once):',
        `  merchant_id    ${demo.merchantId}`,
        `  account_id     ${demo.accountId}`,
        `  client_id      ${demo.clientId}`,
        `  client_secret  ${demo.clientSecret}`,
        `  pix keys       ${demo.pixKeys.join(', ')}`,
        ...(demo.receiverKeys.length ? [`  pay (sandbox)  ${demo.receiverKeys.join(', ')} (keys of another bank: a cash-out to them settles)`] : []),
        `  try:           curl -H 'Authorization: ApiKey ${demo.clientId}:<client_secret>' ${url}/api/external/balance`,
        '',
      ].join('\n') + '\n',
    );
  }
}

/**
 * Metrics: a cluster worker's registry is summed by the primary (main.ts); a single process
 * serves METRICS_PORT itself (the listener returned, closed on stop).
 */
async function serveMetrics(ctx: AppContext): Promise<import('node:http').Server | undefined> {
  const { config, metrics, log } = ctx;
  if (cluster.isWorker) {
    shareWithClusterPrimary(metrics.registry);
    return undefined;
  }
  if (config.metricsPort === undefined) return undefined;
  const listener = await startMetricsListener(config.metricsPort, config.metricsHost, async () => ({ text: await metrics.text(), contentType: metrics.contentType }));
  log.info({ port: config.metricsPort, host: config.metricsHost }, 'metrics listener ready');
  return listener;
}
