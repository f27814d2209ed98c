import { describe, expect, it } from 'vitest';
import { ConfigError, parseConfig } from '../src/config.js';

describe('config', () => {
  it('has the contract defaults', () => {
    const c = parseConfig({});
    expect(c).toMatchObject({
      port: 8080,
      host: '127.0.0.1',
      appEnv: 'local',
      dataDir: './data',
      databaseUrl: undefined,
      redisUrl: undefined,
      adminTokenGenerated: true,
      rateLimitPerMinute: 90000,
      trustedProxies: [],
      webhookAllowedHosts: [],
      simSettlementMs: 1600,
      simProtectionMs: 30000,
      railTimeoutMs: 10_000,
      idempotencyLeaseMs: 60_000,
      institutionIspb: '99999999',
      tls: undefined,
      webConcurrency: 1,
    });
    expect(c.adminToken).toMatch(/^adm_[A-Za-z0-9_-]{32}$/);
    expect(c.simSeedGenerated).toBe(true);
    expect(Number.isSafeInteger(c.simSeed) && c.simSeed >= 0 && c.simSeed <= 0xffffffff).toBe(true);
  });

  it('reads every variable', () => {
    const c = parseConfig({
      PORT: '9000',
      HOST: '::',
      APP_ENV: 'homologation',
      DATA_DIR: '/tmp/x',
      DATABASE_URL: 'postgres://u@h/db',
      REDIS_URL: 'redis://127.0.0.1:6379',
      ADMIN_TOKEN: 'a-long-enough-admin-token',
      RATE_LIMIT_PER_MINUTE: '10',
      TRUSTED_PROXIES: '10.0.0.1, 192.168.0.0/16,::1',
      WEBHOOK_ALLOWED_HOSTS: 'Localhost:8443,127.0.0.1',
      SIM_SETTLEMENT_MS: '50',
      SIM_PROTECTION_MS: '100',
      SIM_SEED: '424242',
      INSTITUTION_ISPB: '12345678',
      WEB_CONCURRENCY: '4',
    });
    expect(c).toMatchObject({
      port: 9000,
      host: '::',
      appEnv: 'homologation',
      dataDir: '/tmp/x',
      databaseUrl: 'postgres://u@h/db',
      redisUrl: 'redis://127.0.0.1:6379',
      adminToken: 'a-long-enough-admin-token',
      adminTokenGenerated: false,
      rateLimitPerMinute: 10,
      webhookAllowedHosts: ['localhost:8443', '127.0.0.1'],
      simSettlementMs: 50,
      simProtectionMs: 100,
      simSeed: 424242,
      simSeedGenerated: false,
      institutionIspb: '12345678',
      webConcurrency: 4,
    });
    expect(c.trustedProxies.map((r) => `${r.family}/${r.prefix}`)).toEqual(['4/32', '4/16', '6/128']);
  });

  it('production with DATABASE_URL, ADMIN_TOKEN and REDIS_URL starts; bounds and retention have defaults', () => {
    const c = parseConfig({ APP_ENV: 'production', DATABASE_URL: 'postgres://h/db', ADMIN_TOKEN: 'a-long-enough-admin-token', REDIS_URL: 'redis://h:6379' });
    expect(c.appEnv).toBe('production');
    expect(c.db).toEqual({ pooler: 'none', listenUrl: undefined, readUrl: undefined, readMaxLagMs: 5000, poolMax: 20, backgroundPoolMax: 5, statementTimeoutMs: 30_000, lockTimeoutMs: 10_000, idleInTransactionTimeoutMs: 60_000 });
    expect(c.retention).toEqual({ idempotencyHours: 0, railInboxDays: 7, eventDays: 30, simDays: 100, intervalMs: 60_000, batchSize: 1000 });
    const custom = parseConfig({ DATABASE_POOL_MAX: '8', DATABASE_BACKGROUND_POOL_MAX: '2', DB_STATEMENT_TIMEOUT_MS: '5000', DB_LOCK_TIMEOUT_MS: '1000', DB_IDLE_IN_TRANSACTION_TIMEOUT_MS: '2000', RETENTION_EVENT_DAYS: '90' });
    expect(custom.db).toMatchObject({ poolMax: 8, backgroundPoolMax: 2, statementTimeoutMs: 5000, lockTimeoutMs: 1000, idleInTransactionTimeoutMs: 2000 });
    expect(custom.retention.eventDays).toBe(90);
  });

  it('Redis through Sentinel: REDIS_SENTINELS and REDIS_MASTER_NAME (passwords optional) satisfy production and WEB_CONCURRENCY', () => {
    const c = parseConfig({
      APP_ENV: 'production',
      DATABASE_URL: 'postgres://h/db',
      ADMIN_TOKEN: 'a-long-enough-admin-token',
      REDIS_SENTINELS: 's1.internal:26379, 10.0.0.2:26380,[::1]:26381',
      REDIS_MASTER_NAME: 'pixgate',
      REDIS_PASSWORD: 'master-secret',
      REDIS_SENTINEL_PASSWORD: 'sentinel-secret',
      WEB_CONCURRENCY: '2',
    });
    expect(c.redisUrl).toBeUndefined();
    expect(c.redisSentinel).toEqual({
      sentinels: [
        { host: 's1.internal', port: 26379 },
        { host: '10.0.0.2', port: 26380 },
        { host: '::1', port: 26381 },
      ],
      masterName: 'pixgate',
      password: 'master-secret',
      sentinelPassword: 'sentinel-secret',
    });
    expect(parseConfig({ REDIS_SENTINELS: 'h:1', REDIS_MASTER_NAME: 'm' }).redisSentinel).toEqual({ sentinels: [{ host: 'h', port: 1 }], masterName: 'm', password: undefined, sentinelPassword: undefined });
    expect(parseConfig({}).redisSentinel).toBeUndefined();
  });

  it.each([
    [{ PORT: 'abc' }, 'PORT must be a whole number, got "abc"'],
    [{ PORT: '70000' }, 'PORT must be between 0 and 65535, got 70000'],
    [{ APP_ENV: 'staging' }, 'APP_ENV must be one of local, homologation, production; got "staging"'],
    [{ APP_ENV: 'production', ADMIN_TOKEN: 'a-long-enough-admin-token' }, 'APP_ENV=production requires DATABASE_URL'],
    [{ APP_ENV: 'production', DATABASE_URL: 'postgres://h/db' }, 'APP_ENV=production requires ADMIN_TOKEN'],
    [{ APP_ENV: 'homologation' }, 'APP_ENV=homologation requires ADMIN_TOKEN'],
    [{ APP_ENV: 'production', DATABASE_URL: 'postgres://h/db', ADMIN_TOKEN: 'a-long-enough-admin-token' }, 'APP_ENV=production requires REDIS_URL'],
    [{ DB_STATEMENT_TIMEOUT_MS: '10' }, 'DB_STATEMENT_TIMEOUT_MS must be between 100 and 3600000, got 10'],
    [{ DATABASE_POOL_MAX: '1' }, 'DATABASE_POOL_MAX must be between 2 and 1000, got 1'],
    [{ DATABASE_POOL_MAX: '4', DATABASE_BACKGROUND_POOL_MAX: '4' }, 'DATABASE_BACKGROUND_POOL_MAX must be below DATABASE_POOL_MAX'],
    [{ RETENTION_IDEMPOTENCY_HOURS: 'x' }, 'RETENTION_IDEMPOTENCY_HOURS must be a whole number, got "x"'],
    [{ WEB_CONCURRENCY: '2' }, 'WEB_CONCURRENCY above 1 requires DATABASE_URL and REDIS_URL'],
    [{ WEB_CONCURRENCY: '2', DATABASE_URL: 'postgres://h/db' }, 'WEB_CONCURRENCY above 1 requires DATABASE_URL and REDIS_URL'],
    [{ WEB_CONCURRENCY: '0' }, 'WEB_CONCURRENCY must be between 1 and 64, got 0'],
    [{ DATABASE_URL: 'mysql://h/db' }, 'DATABASE_URL must start with postgres:// or postgresql://'],
    [{ REDIS_URL: 'localhost:6379' }, 'REDIS_URL must start with redis:// or rediss://'],
    [{ REDIS_SENTINELS: 's1:26379' }, 'REDIS_SENTINELS requires REDIS_MASTER_NAME'],
    [{ REDIS_MASTER_NAME: 'mymaster' }, 'REDIS_MASTER_NAME requires REDIS_SENTINELS'],
    [{ REDIS_SENTINELS: 's1', REDIS_MASTER_NAME: 'm' }, 'REDIS_SENTINELS entry "s1" is not host:port'],
    [{ REDIS_SENTINELS: 's1:0', REDIS_MASTER_NAME: 'm' }, 'REDIS_SENTINELS entry "s1:0" is not host:port'],
    [{ REDIS_SENTINELS: 'redis://s1:26379', REDIS_MASTER_NAME: 'm' }, 'REDIS_SENTINELS entry "redis://s1:26379" is not host:port'],
    [{ REDIS_SENTINELS: ' , ', REDIS_MASTER_NAME: 'm' }, 'REDIS_SENTINELS must list at least one host:port'],
    [{ REDIS_URL: 'redis://h:6379', REDIS_SENTINELS: 's1:26379', REDIS_MASTER_NAME: 'm' }, 'Set REDIS_URL or REDIS_SENTINELS, not both'],
    [{ REDIS_URL: 'redis://h:6379', REDIS_PASSWORD: 'secret' }, 'REDIS_PASSWORD and REDIS_SENTINEL_PASSWORD apply to REDIS_SENTINELS only'],
    [{ ADMIN_TOKEN: 'short' }, 'ADMIN_TOKEN must be at least 16 characters'],
    [{ RAIL_TIMEOUT_MS: '60000' }, 'RAIL_TIMEOUT_MS (60000) must be shorter than IDEMPOTENCY_LEASE_MS (60000)'],
    [{ RAIL_TIMEOUT_MS: '500', IDEMPOTENCY_LEASE_MS: '400' }, 'RAIL_TIMEOUT_MS (500) must be shorter than IDEMPOTENCY_LEASE_MS (400)'],
    [{ RATE_LIMIT_PER_MINUTE: '1.5' }, 'RATE_LIMIT_PER_MINUTE must be a whole number, got "1.5"'],
    [{ TRUSTED_PROXIES: '10.0.0.1,proxy.local' }, 'TRUSTED_PROXIES entry "proxy.local" is not an IP address or CIDR'],
    [{ INSTITUTION_ISPB: '1234' }, 'INSTITUTION_ISPB must be exactly 8 digits'],
    [{ SIM_SETTLEMENT_MS: '-1' }, 'SIM_SETTLEMENT_MS must be a whole number, got "-1"'],
    [{ SIM_SEED: 'abc' }, 'SIM_SEED must be a whole number, got "abc"'],
    [{ SIM_SEED: '4294967296' }, 'SIM_SEED must be between 0 and 4294967295, got 4294967296'],
    [{ TLS_CERT_FILE: '/nonexistent.pem' }, 'TLS_CERT_FILE and TLS_KEY_FILE must be set together'],
    [{ TLS_CERT_FILE: '/nonexistent.pem', TLS_KEY_FILE: '/nonexistent.key' }, 'cannot read TLS files'],
    [{ LOG_LEVEL: 'verbose' }, 'LOG_LEVEL must be one of'],
  ])('refuses %j', (env, message) => {
    expect(() => parseConfig(env)).toThrow(ConfigError);
    expect(() => parseConfig(env)).toThrow(message);
  });
});
