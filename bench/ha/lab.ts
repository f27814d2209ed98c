/**
 * The high-availability lab of `npm run ha` (docs/deploy.md): etcd, three PostgreSQL 15 nodes
 * under Patroni (synchronous_mode_strict), HAProxy (primary by Patroni's health endpoint, Redis
 * master by role, app nodes by /readyz), pgbouncer in transaction mode, a Redis master and replica
 * watched by three Sentinels, and pixgate processes — all from Debian packages, on 127.0.0.1 with
 * ports of one reserved block (./ports.ts), in one temporary folder, rendered from the templates in deploy/. Nothing here touches
 * the machine's PostgreSQL (5432) or Redis (6379).
 */
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import pg from 'pg';
import { packageRoot } from '../../src/lib/paths.js';
import { PixgateServer, postgresBin, sleep } from '../chaos/infra.js';
import { Daemon, giveToPostgres, render, waitFor } from './host.js';
import { PortBlock } from './ports.js';

export { ensurePrerequisites, pixgateSupports, waitFor } from './host.js';

export interface PatroniNode {
  name: string;
  pgPort: number;
  restPort: number;
  dataDir: string;
  daemon: Daemon;
}

export interface Member {
  name: string;
  role: string;
  state: string;
  lag?: number | string;
  timeline?: number;
}

export interface LabOptions {
  /** pixgate through pgbouncer in transaction mode (DATABASE_POOLER=transaction). */
  pooler: boolean;
  /** pixgate finds Redis through Sentinel (REDIS_SENTINELS); otherwise through HAProxy's redis_master. */
  sentinel: boolean;
  appNodes: number;
  /** Extra environment of every pixgate process. */
  appEnv: Record<string, string>;
  log: (line: string) => void;
}

export const SENTINEL_MASTER = 'pixgate';
/** The timeouts pixgate sets per connection, given to its role for use through a pooler (docs/deploy.md). */
export const ROLE_SETTINGS = { statement_timeout: '30s', lock_timeout: '10s', idle_in_transaction_session_timeout: '60s' };

export class Lab {
  readonly dir = mkdtempSync(join(tmpdir(), 'pixgate-ha-'));
  readonly nodes: PatroniNode[] = [];
  readonly apps: PixgateServer[] = [];
  readonly ports: Record<string, number> = {};
  private readonly daemons: Daemon[] = [];
  private etcd!: Daemon;
  private haproxy!: Daemon;
  private pgbouncer!: Daemon;
  readonly redis: { port: number; daemon: Daemon }[] = [];
  // (a Redis node's daemon is replaced when it is restarted after a crash)
  readonly sentinels: { port: number; daemon: Daemon }[] = [];
  readonly adminToken = `ha-${Math.random().toString(36).slice(2)}${Date.now().toString(36)}`;

  constructor(readonly o: LabOptions) {
    giveToPostgres(this.dir);
  }

  /** Set by destroy: nothing starts any more (a fault in progress may still try). */
  private destroyed = false;

  private daemon(name: string, command: string, args: string[], asPostgres = false): Daemon {
    const d = new Daemon(name, command, args, join(this.dir, `${name}.log`), asPostgres, () => this.destroyed);
    this.daemons.push(d);
    return d;
  }

  /** The superuser's URL of `db` through HAProxy's primary address. */
  primaryUrl(db = 'pixgate'): string {
    return `postgres://postgres@127.0.0.1:${this.ports.haproxyPg}/${db}`;
  }

  get appUrl(): string {
    return `http://127.0.0.1:${this.ports.haproxyApp}`;
  }

  /** Every port of the lab, from one block below the ephemeral range (./ports.ts: no free-port race). */
  private block: PortBlock | undefined;
  private async freePort(): Promise<number> {
    this.block ??= await PortBlock.reserve();
    return this.block.take();
  }

  async start(receiverPort: number): Promise<void> {
    const log = this.o.log;
    for (const k of ['etcdClient', 'etcdPeer', 'haproxyPg', 'haproxyRedis', 'haproxyApp', 'pgbouncer']) this.ports[k] = await this.freePort();
    // etcd (one member in the lab; three in production).
    this.etcd = this.daemon('etcd', 'etcd', [
      '--name', 'lab', '--data-dir', join(this.dir, 'etcd'),
      '--listen-client-urls', `http://127.0.0.1:${this.ports.etcdClient}`, '--advertise-client-urls', `http://127.0.0.1:${this.ports.etcdClient}`,
      '--listen-peer-urls', `http://127.0.0.1:${this.ports.etcdPeer}`, '--initial-advertise-peer-urls', `http://127.0.0.1:${this.ports.etcdPeer}`,
      '--initial-cluster', `lab=http://127.0.0.1:${this.ports.etcdPeer}`, '--logger', 'zap', '--log-level', 'warn',
    ]);
    this.etcd.start();
    await waitFor(async () => (await fetch(`http://127.0.0.1:${this.ports.etcdClient}/health`, { signal: AbortSignal.timeout(1000) })).ok, 20_000, 'etcd');

    // Three Patroni nodes; the first bootstraps, the others clone from it.
    for (let i = 1; i <= 3; i++) {
      const name = `pg${i}`;
      const nodeDir = join(this.dir, name);
      mkdirSync(nodeDir);
      giveToPostgres(nodeDir);
      const node = { name, pgPort: await this.freePort(), restPort: await this.freePort(), dataDir: join(nodeDir, 'data') } as PatroniNode;
      const config = join(nodeDir, 'patroni.yml');
      writeFileSync(config, render('patroni.yml', { SCOPE: `lab-${process.pid}`, NAME: name, REST_PORT: node.restPort, PG_PORT: node.pgPort, ETCD_HOSTS: `127.0.0.1:${this.ports.etcdClient}`, DATA_DIR: node.dataDir, PG_BIN: postgresBin()!, DIR: nodeDir, MAX_CONNECTIONS: 150, SHARED_BUFFERS: '64MB' }));
      giveToPostgres(config);
      node.daemon = this.daemon(name, 'patroni', [config], true);
      this.nodes.push(node);
    }
    this.nodes[0]!.daemon.start();
    await waitFor(async () => (await this.members()).some((m) => m.role === 'leader' && m.state === 'running'), 60_000, 'the Patroni leader');
    for (const n of this.nodes.slice(1)) n.daemon.start();

    // Redis master and replica, three Sentinels.
    for (let i = 0; i < 2; i++) {
      const port = await this.freePort();
      const args = ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--dir', this.dir, ...(i > 0 ? ['--replicaof', '127.0.0.1', String(this.redis[0]!.port)] : [])];
      const daemon = this.daemon(`redis${i + 1}`, 'redis-server', args);
      daemon.start();
      this.redis.push({ port, daemon });
    }
    for (let i = 0; i < 3; i++) {
      const port = await this.freePort();
      const sdir = join(this.dir, `sentinel${i + 1}`);
      mkdirSync(sdir);
      const conf = join(sdir, 'sentinel.conf');
      writeFileSync(conf, render('sentinel.conf', { PORT: port, DIR: sdir, MASTER_NAME: SENTINEL_MASTER, MASTER_PORT: this.redis[0]!.port }));
      const daemon = this.daemon(`sentinel${i + 1}`, 'redis-sentinel', [conf]);
      daemon.start();
      this.sentinels.push({ port, daemon });
    }

    // HAProxy: the stable addresses of the primary, the Redis master and the app nodes.
    const appPorts: number[] = [];
    for (let i = 0; i < this.o.appNodes; i++) appPorts.push(await this.freePort());
    writeFileSync(
      join(this.dir, 'haproxy.cfg'),
      render('haproxy.cfg', {
        DIR: this.dir,
        DEPLOY_DIR: join(packageRoot, 'deploy'),
        PG_PORT: this.ports.haproxyPg!,
        REDIS_PORT: this.ports.haproxyRedis!,
        APP_PORT: this.ports.haproxyApp!,
        PG_SERVERS: this.nodes.map((n) => `    server ${n.name} 127.0.0.1:${n.pgPort} check port ${n.restPort}`).join('\n'),
        REDIS_SERVERS: this.redis.map((r, i) => `    server redis${i + 1} 127.0.0.1:${r.port} check`).join('\n'),
        APP_SERVERS: appPorts.map((p, i) => `    server app${i + 1} 127.0.0.1:${p} check`).join('\n'),
      }),
    );
    this.haproxy = this.daemon('haproxy', '/usr/sbin/haproxy', ['-db', '-f', join(this.dir, 'haproxy.cfg')]);
    this.haproxy.start();
    // HAProxy counts every server up until its first failed checks: wait until only the primary answers.
    await waitFor(async () => (await this.canQuery(this.primaryUrl('postgres'))) && (await sleep(1500), true) && (await this.canQuery(this.primaryUrl('postgres'))) && (await this.canQuery(this.primaryUrl('postgres'))) && (await this.canQuery(this.primaryUrl('postgres'))), 60_000, 'the primary through HAProxy');

    // pixgate's database and role, with the timeouts a pooler cannot carry as startup parameters.
    const db = new pg.Client({ connectionString: this.primaryUrl('postgres') });
    await db.connect();
    await db.query(`CREATE ROLE pixgate LOGIN`);
    for (const [k, v] of Object.entries(ROLE_SETTINGS)) await db.query(`ALTER ROLE pixgate SET ${k} = '${v}'`);
    await db.query(`CREATE DATABASE pixgate OWNER pixgate`);
    await db.end();

    // pgbouncer in transaction mode in front of HAProxy's primary address (runs as postgres: it refuses root).
    const bdir = join(this.dir, 'pgbouncer');
    mkdirSync(bdir);
    writeFileSync(join(bdir, 'userlist.txt'), '"pixgate" ""\n"postgres" ""\n');
    writeFileSync(join(bdir, 'pgbouncer.ini'), render('pgbouncer.ini', { DIR: bdir, PORT: this.ports.pgbouncer!, UPSTREAM_PORT: this.ports.haproxyPg!, POOL_SIZE: 20 }));
    for (const f of ['', 'userlist.txt', 'pgbouncer.ini']) giveToPostgres(join(bdir, f));
    this.pgbouncer = this.daemon('pgbouncer', 'pgbouncer', [join(bdir, 'pgbouncer.ini')], true);
    this.pgbouncer.start();
    await waitFor(() => this.canQuery(`postgres://pixgate@127.0.0.1:${this.ports.pgbouncer}/pixgate`), 30_000, 'pgbouncer');
    await waitFor(async () => (await this.members()).filter((m) => m.state === 'running' || m.state === 'streaming').length === 3 && (await this.members()).some((m) => m.role === 'sync_standby'), 120_000, 'three nodes with a synchronous standby');
    await this.waitRedisReplica();

    // The app nodes.
    const direct = `postgres://pixgate@127.0.0.1:${this.ports.haproxyPg}/pixgate`;
    const env: Record<string, string> = {
      ...(this.o.pooler
        ? { DATABASE_URL: `postgres://pixgate@127.0.0.1:${this.ports.pgbouncer}/pixgate`, DATABASE_POOLER: 'transaction', DATABASE_LISTEN_URL: direct }
        : { DATABASE_URL: direct }),
      ...(this.o.sentinel
        ? { REDIS_SENTINELS: this.sentinels.map((s) => `127.0.0.1:${s.port}`).join(','), REDIS_MASTER_NAME: SENTINEL_MASTER }
        : { REDIS_URL: `redis://127.0.0.1:${this.ports.haproxyRedis}` }),
      ADMIN_TOKEN: this.adminToken,
      APP_ENV: 'local',
      LOG_LEVEL: 'warn',
      WEB_CONCURRENCY: '1',
      WEBHOOK_ALLOWED_HOSTS: `127.0.0.1:${receiverPort}`,
      RATE_LIMIT_PER_MINUTE: '100000000',
      ...this.o.appEnv,
    };
    for (let i = 0; i < this.o.appNodes; i++) this.apps.push(new PixgateServer(env, appPorts[i]!, join(this.dir, `pixgate${i + 1}.log`)));
    // The first runs the migrations alone; the others start once it is ready.
    await this.apps[0]!.start();
    await Promise.all(this.apps.slice(1).map((a) => a.start()));
    await waitFor(async () => (await fetch(`${this.appUrl}/readyz`, { signal: AbortSignal.timeout(1000) })).status === 200, 20_000, 'the app nodes through HAProxy');
    log(`lab up in ${this.dir}: Patroni ${this.nodes.map((n) => `${n.name}:${n.pgPort}`).join(' ')}, HAProxy pg ${this.ports.haproxyPg} redis ${this.ports.haproxyRedis} app ${this.ports.haproxyApp}, pgbouncer ${this.ports.pgbouncer}${this.o.pooler ? ' (in use)' : ' (not used by pixgate: --pooler off)'}, Redis ${this.redis.map((r) => r.port).join('/')}, Sentinels ${this.sentinels.map((s) => s.port).join(',')}${this.o.sentinel ? ' (in use)' : ' (pixgate through HAProxy redis_master)'}, pixgate ${this.apps.map((a) => a.port).join(',')}`);
  }

  private async canQuery(url: string): Promise<boolean> {
    const c = new pg.Client({ connectionString: url, connectionTimeoutMillis: 2000 });
    try {
      await c.connect();
      await c.query('SELECT 1');
      return true;
    } catch {
      return false;
    } finally {
      await c.end().catch(() => {});
    }
  }

  /** The cluster as Patroni sees it (GET /cluster of any node that answers). */
  async members(): Promise<Member[]> {
    for (const n of this.nodes) {
      if (!n.daemon.alive()) continue;
      try {
        const r = await fetch(`http://127.0.0.1:${n.restPort}/cluster`, { signal: AbortSignal.timeout(1500) });
        if (r.ok) return ((await r.json()) as { members: Member[] }).members;
      } catch {
        // this node does not answer; ask the next
      }
    }
    return [];
  }

  node(name: string): PatroniNode {
    return this.nodes.find((n) => n.name === name)!;
  }

  async leader(): Promise<PatroniNode | undefined> {
    const m = (await this.members()).find((x) => x.role === 'leader' && x.state === 'running');
    return m ? this.node(m.name) : undefined;
  }

  async syncStandby(): Promise<PatroniNode | undefined> {
    const m = (await this.members()).find((x) => x.role === 'sync_standby');
    return m ? this.node(m.name) : undefined;
  }

  /** All three running (the leader, a synchronous standby and a streaming replica). */
  /**
   * Three members, one running leader, a synchronous standby, and every replica following the
   * leader's timeline with a known lag. A crashed primary restarting as a replica streams for a
   * moment on its old timeline before Patroni sees the divergence and rewinds it: "running" alone
   * let the next fault kill the leader in the middle of that pg_rewind (the long run's pg1 never
   * came back).
   */
  async healthy(): Promise<boolean> {
    const ms = await this.members();
    const leaders = ms.filter((m) => m.role === 'leader' && m.state === 'running');
    if (ms.length !== 3 || leaders.length !== 1) return false;
    const timeline = leaders[0]!.timeline;
    const replicas = ms.filter((m) => m.role !== 'leader');
    return (
      replicas.some((m) => m.role === 'sync_standby') &&
      replicas.every((m) => (m.state === 'running' || m.state === 'streaming') && typeof m.lag === 'number' && (timeline === undefined || m.timeline === timeline))
    );
  }

  /** Healthy, and still so 2 s later. */
  async waitHealthy(timeoutMs = 180_000): Promise<void> {
    try {
      await waitFor(async () => (await this.healthy()) && (await sleep(2000), await this.healthy()), timeoutMs, 'the Patroni cluster to be whole again');
    } catch (err) {
      throw new Error(`${(err as Error).message}: ${JSON.stringify(await this.members().catch(() => []))} (logs in ${this.dir})`);
    }
  }

  /** SIGKILL of the postmaster of `node` (a crash of PostgreSQL; Patroni lives on). */
  sigkillPostmaster(node: PatroniNode): number {
    const pid = Number(readFileSync(join(node.dataDir, 'postmaster.pid'), 'utf8').split('\n')[0]);
    process.kill(pid, 'SIGKILL');
    return pid;
  }

  /** A planned switchover to the synchronous standby through Patroni's REST API. */
  async switchover(): Promise<{ from: string; to: string }> {
    const leader = await this.leader();
    const sync = await this.syncStandby();
    if (!leader || !sync) throw new Error('switchover: no leader or no synchronous standby');
    const r = await fetch(`http://127.0.0.1:${leader.restPort}/switchover`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ leader: leader.name, candidate: sync.name }), signal: AbortSignal.timeout(30_000) });
    if (!r.ok) throw new Error(`switchover: ${r.status} ${await r.text()}`);
    return { from: leader.name, to: sync.name };
  }

  /** Stops a node's Patroni (and with it its PostgreSQL, cleanly). */
  async stopNode(node: PatroniNode): Promise<void> {
    await node.daemon.stop('SIGTERM', 30_000);
    await this.killPostmaster(node);
  }

  startNode(node: PatroniNode): void {
    node.daemon.start();
  }

  private async killPostmaster(node: PatroniNode): Promise<void> {
    try {
      const pid = Number(readFileSync(join(node.dataDir, 'postmaster.pid'), 'utf8').split('\n')[0]);
      if (pid > 0) process.kill(pid, 'SIGKILL');
    } catch {
      // not running
    }
  }

  /** The Redis master's port as the Sentinels see it. */
  async redisMasterPort(): Promise<number> {
    const s = new Redis({ port: this.sentinels[0]!.port, host: '127.0.0.1', lazyConnect: true, maxRetriesPerRequest: 1 });
    try {
      await s.connect();
      const [, port] = (await s.call('SENTINEL', 'get-master-addr-by-name', SENTINEL_MASTER)) as [string, string];
      return Number(port);
    } finally {
      s.disconnect();
    }
  }

  private async waitRedisReplica(): Promise<void> {
    await waitFor(async () => {
      const master = await this.redisMasterPort();
      const c = new Redis({ port: master, host: '127.0.0.1', lazyConnect: true, maxRetriesPerRequest: 1 });
      try {
        await c.connect();
        const info = (await c.info('replication')) as string;
        return /connected_slaves:1/.test(info) && /state=online/.test(info);
      } finally {
        c.disconnect();
      }
    }, 30_000, 'the Redis replica');
  }

  /**
   * A Redis failover by Sentinel: `crash` SIGKILLs the master (what an outage does: writes not yet
   * replicated are lost) and restarts it as a replica of the promoted one; otherwise a planned
   * `SENTINEL FAILOVER`. Waits until the new master has its replica again.
   */
  async redisFailover(crash: boolean): Promise<{ from: number; to: number }> {
    const from = await this.redisMasterPort();
    const old = this.redis.find((r) => r.port === from)!;
    if (crash) await old.daemon.stop('SIGKILL', 3000);
    else {
      const s = new Redis({ port: this.sentinels[0]!.port, host: '127.0.0.1', lazyConnect: true, maxRetriesPerRequest: 1 });
      try {
        await s.connect();
        await s.call('SENTINEL', 'FAILOVER', SENTINEL_MASTER);
      } finally {
        s.disconnect();
      }
    }
    await waitFor(async () => (await this.redisMasterPort()) !== from, 60_000, 'the Sentinel failover');
    const to = await this.redisMasterPort();
    if (crash) {
      // Back as a replica of the new master from its first moment (never an empty master that a
      // role:master health check could pick up).
      const args = old.daemon.args.filter((_, i, a) => a[i] !== '--replicaof' && a[i - 1] !== '--replicaof' && a[i - 2] !== '--replicaof');
      const restarted = this.daemon(old.daemon.name, 'redis-server', [...args, '--replicaof', '127.0.0.1', String(to)]);
      restarted.start();
      old.daemon = restarted;
    }
    await this.waitRedisReplica();
    return { from, to };
  }

  /**
   * On a signal: everything SIGKILLed at once, synchronously (npm and tsx may end this process
   * soon after relaying Ctrl-C, before an orderly teardown could finish), and the folder removed.
   */
  killAllNow(keep: boolean): void {
    this.destroyed = true;
    const kill = (pid: number | undefined, group: boolean) => {
      if (!pid) return;
      try {
        process.kill(group ? -pid : pid, 'SIGKILL');
      } catch {
        // gone
      }
    };
    for (const a of this.apps) kill(a.proc?.pid, true);
    for (const d of [...this.daemons, ...this.redis.map((r) => r.daemon)]) kill(d.proc?.pid, true);
    for (const n of this.nodes) {
      try {
        kill(Number(readFileSync(join(n.dataDir, 'postmaster.pid'), 'utf8').split('\n')[0]), false);
      } catch {
        // not running
      }
    }
    for (let round = 0; round < 2; round++) {
      const ps = spawnSync('pgrep', ['-f', this.dir], { encoding: 'utf8' });
      for (const pid of ps.stdout.split('\n').map(Number).filter((p) => p > 0 && p !== process.pid)) kill(pid, false);
      spawnSync('sleep', ['0.3']);
    }
    if (!keep) rmSync(this.dir, { recursive: true, force: true });
    this.block?.release();
  }

  /** Everything stopped and the folder removed (unless kept). */
  async destroy(keep: boolean): Promise<void> {
    this.destroyed = true;
    await Promise.all(this.apps.map((a) => a.kill('SIGKILL').catch(() => {})));
    for (const d of [this.haproxy, this.pgbouncer, ...this.sentinels.map((s) => s.daemon), ...this.redis.map((r) => r.daemon)]) await d?.stop('SIGKILL', 3000).catch(() => {});
    await Promise.all(this.nodes.map((n) => n.daemon.stop('SIGTERM', 10_000).catch(() => {})));
    for (const n of this.nodes) await this.killPostmaster(n);
    await this.etcd?.stop('SIGKILL', 3000).catch(() => {});
    // Stragglers (a postmaster Patroni started in its own session): anything still running from our folder, twice.
    for (let round = 0; round < 2; round++) {
      const ps = spawnSync('pgrep', ['-f', this.dir], { encoding: 'utf8' });
      for (const pid of ps.stdout.split('\n').map(Number).filter((p) => p > 0 && p !== process.pid)) {
        try {
          process.kill(pid, 'SIGKILL');
        } catch {
          // gone
        }
      }
      await sleep(500);
    }
    if (!keep) rmSync(this.dir, { recursive: true, force: true });
    this.block?.release();
  }
}

/** On Ctrl-C (SIGINT) or SIGTERM: every process of the lab stopped and its folder removed, then exit 130. Returns the uninstaller. */
export function tearDownOnSignal(lab: Lab, keep: boolean, log: (line: string) => void): () => void {
  const handler = () => {
    log('interrupted: killing the lab');
    lab.killAllNow(keep);
    process.exit(130);
  };
  process.once('SIGINT', handler);
  process.once('SIGTERM', handler);
  return () => {
    process.removeListener('SIGINT', handler);
    process.removeListener('SIGTERM', handler);
  };
}
