import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { isIPv6 } from 'node:net';
import { parseHostList } from './db/hosts.js';
import { parseIpRule, type IpRule } from './lib/ip.js';

/** Runtime environment. Decides signature versions, boleto limit multipliers, sandbox and demo seeding. */
export type AppEnv = 'local' | 'homologation' | 'production';

export interface Config {
  port: number;
  host: string;
  appEnv: AppEnv;
  /** Folder of the embedded database, or `memory://`; ignored when `databaseUrl` is set. */
  dataDir: string;
  databaseUrl: string | undefined;
  redisUrl: string | undefined;
  /** REDIS_SENTINELS and REDIS_MASTER_NAME: Redis found through Sentinel (exclusive with REDIS_URL). */
  redisSentinel: RedisSentinelConfig | undefined;
  /**
   * REDIS_COMMAND_TIMEOUT_MS: a Redis command unanswered for this long fails, and a connection
   * silent for this long with commands pending is reopened (a hung Redis behaves like a stopped one).
   */
  redisCommandTimeoutMs: number;
  /**
   * READYZ_REDIS: what `/readyz` says when Redis (configured) does not answer. `required` (default,
   * the operator contract): 503 not ready. `degraded`: 200 `degraded` — for a balancer in front of
   * instances that all share one Redis, where taking them all out would be a full outage.
   */
  readyzRedis: 'required' | 'degraded';
  adminToken: string;
  /** True when the admin token was generated at start (local only) and must be printed. */
  adminTokenGenerated: boolean;
  /** The operator console at /console (docs/console.md): CONSOLE_ENABLED, default on except in production. */
  consoleEnabled: boolean;
  rateLimitPerMinute: number;
  trustedProxies: IpRule[];
  /** Lower-cased `host` or `host:port` entries exempt from the private-destination rule of webhooks. */
  webhookAllowedHosts: string[];
  /** Deadline of one webhook delivery attempt (connect, send, response headers and body). */
  webhookTimeoutMs: number;
  /** Waits before each retry of a failed delivery; its length is the number of retries. */
  webhookRetryScheduleMs: number[];
  simSettlementMs: number;
  simProtectionMs: number;
  /** RAIL_TIMEOUT_MS: deadline of every call pixgate makes to the rail; shorter than the idempotency lease. */
  railTimeoutMs: number;
  /**
   * IDEMPOTENCY_LEASE_MS: how long a request holds its Idempotency-Key before a retry may take it
   * over (the holder is presumed dead). Always longer than `railTimeoutMs`.
   */
  idempotencyLeaseMs: number;
  /**
   * AUTH_CACHE_TTL_MS: how long a process keeps an API key (and a boleto central key) it read for
   * authentication; changes invalidate at once through NOTIFY, this is only the safety net. 0: no cache.
   */
  authCacheTtlMs: number;
  /** Seed of the rail simulator's random draws (SIM_SEED); random when unset, logged at start. */
  simSeed: number;
  simSeedGenerated: boolean;
  institutionIspb: string;
  tls: { cert: Buffer; key: Buffer } | undefined;
  /**
   * Host (and port) of the API Pix payload locations, `<host>/qr/v2/<token>` (API_PIX_LOCATION_HOST;
   * default `localhost:<PORT>`): what a payer's bank reads from a dynamic BR Code (docs/api-pix.md).
   */
  apiPixLocationHost: string;
  webConcurrency: number;
  /** Token-less metrics listener (METRICS_PORT, METRICS_HOST); undefined: only GET /metrics with the admin token. */
  metricsPort: number | undefined;
  metricsHost: string;
  logLevel: string;
  /** Connection pools and per-connection limits of PostgreSQL (docs/decisions.md, "Bounds"). */
  db: DbLimits;
  /** Age-based purges of the retention worker. */
  retention: RetentionConfig;
}

export interface DbLimits {
  /** What DATABASE_URL goes through (DATABASE_POOLER: none, session, transaction; src/db/postgres.ts). */
  pooler: 'none' | 'session' | 'transaction';
  /** DATABASE_LISTEN_URL: LISTEN straight to the primary (default DATABASE_URL). */
  listenUrl: string | undefined;
  /** DATABASE_READ_URL: a replica for reads that tolerate staleness (statements, lists, exports). */
  readUrl: string | undefined;
  /** DATABASE_READ_MAX_LAG_MS: past this replay lag the replica is not read (the primary is). */
  readMaxLagMs: number;
  /** Connections per process (DATABASE_POOL_MAX): requests get `poolMax - backgroundPoolMax`. */
  poolMax: number;
  /** Connections background workers may hold at once (DATABASE_BACKGROUND_POOL_MAX). */
  backgroundPoolMax: number;
  /** PostgreSQL statement_timeout of every connection (DB_STATEMENT_TIMEOUT_MS). */
  statementTimeoutMs: number;
  /** lock_timeout (DB_LOCK_TIMEOUT_MS). */
  lockTimeoutMs: number;
  /** idle_in_transaction_session_timeout (DB_IDLE_IN_TRANSACTION_TIMEOUT_MS). */
  idleInTransactionTimeoutMs: number;
}

export interface RedisSentinelConfig {
  /** REDIS_SENTINELS: `host:port,host:port,…` (IPv6 hosts in brackets). */
  sentinels: { host: string; port: number }[];
  /** REDIS_MASTER_NAME: the name the sentinels monitor the master under. */
  masterName: string;
  /** REDIS_SENTINEL_PASSWORD: sent to the sentinels (`requirepass` of sentinel.conf). */
  sentinelPassword: string | undefined;
  /** REDIS_PASSWORD: sent to the master the sentinels name. */
  password: string | undefined;
}

/** Whether a Redis is configured (REDIS_URL or REDIS_SENTINELS). */
export function redisConfigured(config: Pick<Config, 'redisUrl' | 'redisSentinel'>): boolean {
  return config.redisUrl !== undefined || config.redisSentinel !== undefined;
}

function readSentinels(env: Env): RedisSentinelConfig | undefined {
  const list = nonEmpty(env, 'REDIS_SENTINELS');
  const masterName = nonEmpty(env, 'REDIS_MASTER_NAME');
  const sentinelPassword = nonEmpty(env, 'REDIS_SENTINEL_PASSWORD');
  const password = nonEmpty(env, 'REDIS_PASSWORD');
  if (list === undefined) {
    if (masterName !== undefined) throw new ConfigError('REDIS_MASTER_NAME requires REDIS_SENTINELS');
    if (sentinelPassword !== undefined || password !== undefined) {
      throw new ConfigError('REDIS_PASSWORD and REDIS_SENTINEL_PASSWORD apply to REDIS_SENTINELS only (with REDIS_URL the password goes in the URL)');
    }
    return undefined;
  }
  if (masterName === undefined) throw new ConfigError('REDIS_SENTINELS requires REDIS_MASTER_NAME');
  const sentinels = readList(env, 'REDIS_SENTINELS').map((entry) => {
    const m = /^(?:\[([0-9A-Fa-f:.]+)\]|([A-Za-z0-9.\-_]+)):(\d{1,5})$/.exec(entry);
    const port = m ? Number(m[3]) : NaN;
    if (!m || !(port >= 1 && port <= 65535)) throw new ConfigError(`REDIS_SENTINELS entry "${entry}" is not host:port`);
    return { host: (m[1] ?? m[2])!, port };
  });
  if (sentinels.length === 0) throw new ConfigError('REDIS_SENTINELS must list at least one host:port');
  return { sentinels, masterName, sentinelPassword, password };
}

export interface RetentionConfig {
  /** Completed idempotency records are kept this long after their 24-hour window ends (RETENTION_IDEMPOTENCY_HOURS). */
  idempotencyHours: number;
  /** Applied rail-notification ids (RETENTION_RAIL_INBOX_DAYS). */
  railInboxDays: number;
  /** Dispatched outbox events whose deliveries are all final, with those deliveries and attempts (RETENTION_EVENT_DAYS). */
  eventDays: number;
  /** Simulator payments, counted from their final outcome (RETENTION_SIM_DAYS). */
  simDays: number;
  /** How often the retention worker runs (RETENTION_INTERVAL_MS). */
  intervalMs: number;
  /** Rows per delete statement; each run loops until a table has nothing older left (RETENTION_BATCH_SIZE). */
  batchSize: number;
}

/** A configuration error: start-up stops with its message as one line. */
export class ConfigError extends Error {
  override name = 'ConfigError';
}

type Env = Record<string, string | undefined>;

function readInt(env: Env, name: string, fallback: number, min: number, max: number): number {
  const raw = env[name];
  if (raw === undefined || raw.trim() === '') return fallback;
  const text = raw.trim();
  if (!/^\d+$/.test(text)) throw new ConfigError(`${name} must be a whole number, got "${raw}"`);
  const value = Number(text);
  if (!Number.isSafeInteger(value) || value < min || value > max) {
    throw new ConfigError(`${name} must be between ${min} and ${max}, got ${text}`);
  }
  return value;
}

function readList(env: Env, name: string): string[] {
  return (env[name] ?? '')
    .split(',')
    .map((s) => s.trim())
    .filter((s) => s !== '');
}

/** A host or host:port that URL parsing accepts (IPv6 bare or in brackets). */
function isHostEntry(entry: string): boolean {
  try {
    new URL(`http://${isIPv6(entry) ? `[${entry}]` : entry}`);
    return true;
  } catch {
    return false;
  }
}

/** Default waits between webhook delivery attempts: 11 attempts over about 23.7 hours. */
export const DEFAULT_WEBHOOK_RETRY_SCHEDULE = '5s,30s,2m,10m,30m,1h,2h,4h,8h,8h';

const DURATION_UNITS_MS = { ms: 1, s: 1000, m: 60_000, h: 3_600_000 } as const;

/** Comma-separated durations (`500ms`, `5s`, `2m`, `8h`), each at most 24 h, at most 30 of them. */
function readDurations(env: Env, name: string, fallback: string): number[] {
  const raw = nonEmpty(env, name) ?? fallback;
  const items = raw.split(',').map((s) => s.trim());
  if (items.length > 30) throw new ConfigError(`${name} has ${items.length} entries; at most 30`);
  return items.map((item) => {
    const m = /^(\d{1,9})(ms|s|m|h)$/.exec(item);
    const ms = m ? Number(m[1]) * DURATION_UNITS_MS[m[2] as keyof typeof DURATION_UNITS_MS] : NaN;
    if (!(ms <= 86_400_000)) {
      throw new ConfigError(`${name} entry "${item}" is not a duration of at most 24h such as 500ms, 5s, 2m or 1h`);
    }
    return ms;
  });
}

function nonEmpty(env: Env, name: string): string | undefined {
  const v = env[name]?.trim();
  return v === undefined || v === '' ? undefined : v;
}

/**
 * Reads and validates every variable of the operator contract (section 1) once. Any bad value throws
 * a ConfigError whose message names the variable, so start-up stops with one clear line.
 */
// Longer than 70 lines because it is one flat table of every setting of the operator contract; split, a setting would be harder to find.
export function parseConfig(env: Env = process.env): Config {
  const readyzRedisRaw = nonEmpty(env, 'READYZ_REDIS') ?? 'required';
  if (readyzRedisRaw !== 'required' && readyzRedisRaw !== 'degraded') {
    throw new ConfigError(`READYZ_REDIS must be one of required, degraded; got "${readyzRedisRaw}"`);
  }
  const readyzRedis: 'required' | 'degraded' = readyzRedisRaw;
  const appEnvRaw = nonEmpty(env, 'APP_ENV') ?? 'local';
  if (appEnvRaw !== 'local' && appEnvRaw !== 'homologation' && appEnvRaw !== 'production') {
    throw new ConfigError(`APP_ENV must be one of local, homologation, production; got "${appEnvRaw}"`);
  }
  const appEnv: AppEnv = appEnvRaw;

  const port = readInt(env, 'PORT', 8080, 0, 65535);
  const host = nonEmpty(env, 'HOST') ?? '127.0.0.1';

  const databaseUrl = nonEmpty(env, 'DATABASE_URL');
  if (databaseUrl !== undefined && !/^postgres(ql)?:\/\//.test(databaseUrl)) {
    throw new ConfigError('DATABASE_URL must start with postgres:// or postgresql://');
  }
  const redisUrl = nonEmpty(env, 'REDIS_URL');
  if (redisUrl !== undefined && !/^rediss?:\/\//.test(redisUrl)) {
    throw new ConfigError('REDIS_URL must start with redis:// or rediss://');
  }
  const redisSentinel = readSentinels(env);
  if (redisUrl !== undefined && redisSentinel !== undefined) throw new ConfigError('Set REDIS_URL or REDIS_SENTINELS, not both');
  const hasRedis = redisUrl !== undefined || redisSentinel !== undefined;

  let adminToken = nonEmpty(env, 'ADMIN_TOKEN');
  let adminTokenGenerated = false;
  if (adminToken !== undefined && adminToken.length < 16) {
    throw new ConfigError('ADMIN_TOKEN must be at least 16 characters');
  }
  if (appEnv === 'production') {
    if (databaseUrl === undefined) throw new ConfigError('APP_ENV=production requires DATABASE_URL');
    if (adminToken === undefined) throw new ConfigError('APP_ENV=production requires ADMIN_TOKEN');
    // v2 nonces (and rate-limit windows) must be shared by every instance behind a balancer:
    // process memory would let two instances each accept one nonce.
    if (!hasRedis) throw new ConfigError('APP_ENV=production requires REDIS_URL or REDIS_SENTINELS (shared replay protection)');
  }
  if (adminToken === undefined) {
    if (appEnv !== 'local') throw new ConfigError(`APP_ENV=${appEnv} requires ADMIN_TOKEN`);
    adminToken = `adm_${randomBytes(24).toString('base64url')}`;
    adminTokenGenerated = true;
  }

  const trustedProxies = readList(env, 'TRUSTED_PROXIES').map((entry) => {
    const rule = parseIpRule(entry);
    if (rule === null) throw new ConfigError(`TRUSTED_PROXIES entry "${entry}" is not an IP address or CIDR`);
    return rule;
  });

  const webhookAllowedHosts = readList(env, 'WEBHOOK_ALLOWED_HOSTS').map((entry) => {
    if (!/^[a-z0-9.\-_[\]:]+$/i.test(entry) || !isHostEntry(entry)) {
      throw new ConfigError(`WEBHOOK_ALLOWED_HOSTS entry "${entry}" is not a host or host:port`);
    }
    return entry.toLowerCase();
  });
  const webhookRetryScheduleMs = readDurations(env, 'WEBHOOK_RETRY_SCHEDULE', DEFAULT_WEBHOOK_RETRY_SCHEDULE);

  const institutionIspb = nonEmpty(env, 'INSTITUTION_ISPB') ?? '99999999';
  if (!/^\d{8}$/.test(institutionIspb)) throw new ConfigError('INSTITUTION_ISPB must be exactly 8 digits');

  const certFile = nonEmpty(env, 'TLS_CERT_FILE');
  const keyFile = nonEmpty(env, 'TLS_KEY_FILE');
  let tls: Config['tls'];
  if ((certFile === undefined) !== (keyFile === undefined)) {
    throw new ConfigError('TLS_CERT_FILE and TLS_KEY_FILE must be set together');
  }
  if (certFile !== undefined && keyFile !== undefined) {
    try {
      tls = { cert: readFileSync(certFile), key: readFileSync(keyFile) };
    } catch (err) {
      throw new ConfigError(`cannot read TLS files: ${(err as Error).message}`);
    }
  }

  const webConcurrency = readInt(env, 'WEB_CONCURRENCY', 1, 1, 64);
  if (webConcurrency > 1 && (databaseUrl === undefined || !hasRedis)) {
    throw new ConfigError('WEB_CONCURRENCY above 1 requires DATABASE_URL and REDIS_URL (or REDIS_SENTINELS)');
  }

  const metricsPort = nonEmpty(env, 'METRICS_PORT') === undefined ? undefined : readInt(env, 'METRICS_PORT', 0, 0, 65535);

  const seedText = nonEmpty(env, 'SIM_SEED');
  const simSeed = seedText === undefined ? randomBytes(4).readUInt32BE(0) : readInt(env, 'SIM_SEED', 0, 0, 0xffff_ffff);

  const railTimeoutMs = readInt(env, 'RAIL_TIMEOUT_MS', 10_000, 50, 600_000);
  const idempotencyLeaseMs = readInt(env, 'IDEMPOTENCY_LEASE_MS', 60_000, 100, 3_600_000);
  if (railTimeoutMs >= idempotencyLeaseMs) {
    // A request still waiting for the rail must never lose its key to a retry.
    throw new ConfigError(`RAIL_TIMEOUT_MS (${railTimeoutMs}) must be shorter than IDEMPOTENCY_LEASE_MS (${idempotencyLeaseMs})`);
  }

  const logLevel = nonEmpty(env, 'LOG_LEVEL') ?? 'info';
  if (!['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'].includes(logLevel)) {
    throw new ConfigError(`LOG_LEVEL must be one of fatal, error, warn, info, debug, trace, silent; got "${logLevel}"`);
  }

  const poolMax = readInt(env, 'DATABASE_POOL_MAX', 20, 2, 1000);
  const backgroundPoolMax = readInt(env, 'DATABASE_BACKGROUND_POOL_MAX', Math.max(1, Math.min(5, Math.floor(poolMax / 4))), 1, 999);
  if (backgroundPoolMax >= poolMax) throw new ConfigError('DATABASE_BACKGROUND_POOL_MAX must be below DATABASE_POOL_MAX');
  const pooler = nonEmpty(env, 'DATABASE_POOLER') ?? 'none';
  if (pooler !== 'none' && pooler !== 'session' && pooler !== 'transaction') {
    throw new ConfigError(`DATABASE_POOLER must be one of none, session, transaction; got "${pooler}"`);
  }
  const listenUrl = nonEmpty(env, 'DATABASE_LISTEN_URL');
  const readUrl = nonEmpty(env, 'DATABASE_READ_URL');
  for (const [name, url] of [['DATABASE_URL', databaseUrl], ['DATABASE_LISTEN_URL', listenUrl], ['DATABASE_READ_URL', readUrl]] as const) {
    if (url === undefined) continue;
    if (name !== 'DATABASE_URL' && databaseUrl === undefined) throw new ConfigError(`${name} requires DATABASE_URL`);
    if (!/^postgres(ql)?:\/\//.test(url)) throw new ConfigError(`${name} must start with postgres:// or postgresql://`);
    try {
      parseHostList(url);
    } catch (err) {
      throw new ConfigError(`${name}: ${(err as Error).message}`);
    }
  }
  // LISTEN holds its connection for the whole session: a transaction-mode pooler would hand it to
  // other clients between transactions, and the notifications would be lost without a word.
  if (pooler === 'transaction' && databaseUrl !== undefined && listenUrl === undefined) {
    throw new ConfigError('DATABASE_POOLER=transaction requires DATABASE_LISTEN_URL (LISTEN cannot go through a transaction-mode pooler: give a URL straight to the primary)');
  }
  const db: DbLimits = {
    pooler,
    listenUrl,
    readUrl,
    readMaxLagMs: readInt(env, 'DATABASE_READ_MAX_LAG_MS', 5_000, 0, 3_600_000),
    poolMax,
    backgroundPoolMax,
    statementTimeoutMs: readInt(env, 'DB_STATEMENT_TIMEOUT_MS', 30_000, 100, 3_600_000),
    lockTimeoutMs: readInt(env, 'DB_LOCK_TIMEOUT_MS', 10_000, 100, 3_600_000),
    idleInTransactionTimeoutMs: readInt(env, 'DB_IDLE_IN_TRANSACTION_TIMEOUT_MS', 60_000, 100, 3_600_000),
  };
  const retention: RetentionConfig = {
    idempotencyHours: readInt(env, 'RETENTION_IDEMPOTENCY_HOURS', 0, 0, 8760),
    railInboxDays: readInt(env, 'RETENTION_RAIL_INBOX_DAYS', 7, 1, 3650),
    eventDays: readInt(env, 'RETENTION_EVENT_DAYS', 30, 2, 3650),
    simDays: readInt(env, 'RETENTION_SIM_DAYS', 100, 1, 3650),
    intervalMs: readInt(env, 'RETENTION_INTERVAL_MS', 60_000, 100, 86_400_000),
    batchSize: readInt(env, 'RETENTION_BATCH_SIZE', 1000, 1, 100_000),
  };

  return {
    port,
    host,
    appEnv,
    dataDir: nonEmpty(env, 'DATA_DIR') ?? './data',
    databaseUrl,
    redisUrl,
    redisSentinel,
    redisCommandTimeoutMs: readInt(env, 'REDIS_COMMAND_TIMEOUT_MS', 1_000, 10, 60_000),
    readyzRedis,
    adminToken,
    adminTokenGenerated,
    consoleEnabled: consoleEnabled(nonEmpty(env, 'CONSOLE_ENABLED'), appEnv),
    rateLimitPerMinute: readInt(env, 'RATE_LIMIT_PER_MINUTE', 90000, 1, 100_000_000),
    trustedProxies,
    webhookAllowedHosts,
    webhookTimeoutMs: readInt(env, 'WEBHOOK_TIMEOUT_MS', 10_000, 100, 120_000),
    webhookRetryScheduleMs,
    simSettlementMs: readInt(env, 'SIM_SETTLEMENT_MS', 1600, 0, 3_600_000),
    simProtectionMs: readInt(env, 'SIM_PROTECTION_MS', 30000, 0, 86_400_000),
    railTimeoutMs,
    idempotencyLeaseMs,
    authCacheTtlMs: readInt(env, 'AUTH_CACHE_TTL_MS', 5_000, 0, 60_000),
    simSeed,
    simSeedGenerated: seedText === undefined,
    institutionIspb,
    tls,
    apiPixLocationHost: readLocationHost(nonEmpty(env, 'API_PIX_LOCATION_HOST'), port),
    webConcurrency,
    metricsPort,
    metricsHost: nonEmpty(env, 'METRICS_HOST') ?? '127.0.0.1',
    logLevel,
    db,
    retention,
  };
}

/** API_PIX_LOCATION_HOST: a host name with an optional port, no scheme or path (a location is at most 77 characters). */
function readLocationHost(value: string | undefined, port: number): string {
  if (value === undefined) return port === 0 ? 'localhost' : `localhost:${port}`;
  if (!/^[A-Za-z0-9.-]{1,40}(:\d{1,5})?$/.test(value)) throw new ConfigError('API_PIX_LOCATION_HOST must be a host name with an optional :port (no scheme, no path), at most 40 characters');
  return value;
}

/** CONSOLE_ENABLED: `true`/`false`; unset → on in local and homologation, off in production. */
function consoleEnabled(raw: string | undefined, appEnv: AppEnv): boolean {
  if (raw === undefined) return appEnv !== 'production';
  if (raw === 'true') return true;
  if (raw === 'false') return appEnv === 'local'; // always on in local mode (issue 29)
  throw new ConfigError(`CONSOLE_ENABLED must be true or false; got "${raw}"`);
}
