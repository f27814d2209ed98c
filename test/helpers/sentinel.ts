import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';

/**
 * A Redis of its own with Sentinel, for failover tests: a master, one replica and three
 * sentinels (quorum 2), every one on a free port in a temporary folder, all killed and the folder
 * removed by `stop()`. Nothing here touches the machine's Redis.
 */
export interface SentinelLab {
  readonly masterName: string;
  /** `host:port,host:port,host:port`, as REDIS_SENTINELS. */
  readonly sentinels: string;
  /** The port of the master the sentinels name now. */
  masterPort(): Promise<number>;
  /** A plain connection to the current master (for FLUSHALL and for looking at keys). */
  master(): Promise<Redis>;
  /** SENTINEL FAILOVER, then waits until the sentinels name the other node and it is a master. */
  failover(): Promise<{ from: number; to: number }>;
  /** SIGKILL to the master's process, then waits until the sentinels have promoted the replica. */
  killMaster(): Promise<{ from: number; to: number }>;
  stop(): Promise<void>;
}

/** Why the lab cannot run here, or undefined when it can. */
export function sentinelUnavailable(): string | undefined {
  for (const bin of ['redis-server', 'redis-sentinel']) {
    if (spawnSync('sh', ['-c', `command -v ${bin}`]).status !== 0) return `${bin} not found on PATH (apt-get install -y redis-server redis-sentinel)`;
  }
  return undefined;
}

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const port = (s.address() as AddressInfo).port;
      s.close(() => resolve(port));
    });
  });
}

async function until<T>(what: string, probe: () => Promise<T | undefined>, ms = 30_000): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    try {
      const v = await probe();
      if (v !== undefined) return v;
    } catch {
      // not there yet
    }
    if (Date.now() > deadline) throw new Error(`sentinel lab: timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

async function withConnection<T>(port: number, fn: (r: Redis) => Promise<T>): Promise<T> {
  const r = new Redis({ port, host: '127.0.0.1', lazyConnect: true, maxRetriesPerRequest: 0, enableOfflineQueue: false, retryStrategy: () => null });
  r.on('error', () => {});
  try {
    await r.connect();
    return await fn(r);
  } finally {
    r.disconnect();
  }
}

export async function startSentinelLab(): Promise<SentinelLab> {
  const dir = mkdtempSync(join(tmpdir(), 'pixgate-sentinel-'));
  const procs: ChildProcess[] = [];
  const byPort = new Map<number, ChildProcess>();
  const opened: Redis[] = [];
  const masterName = 'pixgate-test';
  // Killed with the test process too, should a test end before its stop().
  process.once('exit', () => {
    for (const p of procs) if (p.exitCode === null && p.signalCode === null) p.kill('SIGKILL');
  });
  const [p1, p2, s1, s2, s3] = await Promise.all([freePort(), freePort(), freePort(), freePort(), freePort()]);
  const server = (port: number, extra: string[]) => {
    const data = join(dir, `redis-${port}`);
    spawnSync('mkdir', ['-p', data]);
    const p = spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--dir', data, ...extra], { stdio: 'ignore' });
    procs.push(p);
    byPort.set(port, p);
  };
  server(p1, []);
  server(p2, ['--replicaof', '127.0.0.1', String(p1)]);
  await until('the replica in sync', () =>
    withConnection(p2, async (r) => ((await r.info('replication')).includes('master_link_status:up') ? true : undefined)),
  );
  const sentinelPorts = [s1!, s2!, s3!];
  for (const port of sentinelPorts) {
    const conf = join(dir, `sentinel-${port}.conf`);
    writeFileSync(
      conf,
      [
        `port ${port}`,
        'bind 127.0.0.1',
        `dir ${dir}`,
        `sentinel monitor ${masterName} 127.0.0.1 ${p1} 2`,
        `sentinel down-after-milliseconds ${masterName} 1000`,
        `sentinel failover-timeout ${masterName} 10000`,
        `sentinel parallel-syncs ${masterName} 1`,
        '',
      ].join('\n'),
    );
    procs.push(spawn('redis-sentinel', [conf], { stdio: 'ignore' }));
  }
  const ask = (port: number, ...args: string[]) => withConnection(port, (r) => r.call('SENTINEL', ...args));
  // Every sentinel knows the replica and the two other sentinels before a failover is asked for.
  for (const port of sentinelPorts) {
    await until(`sentinel ${port} to know the replica and its peers`, async () => {
      const replicas = (await ask(port, 'REPLICAS', masterName)) as string[][];
      const peers = (await ask(port, 'SENTINELS', masterName)) as string[][];
      return replicas.length === 1 && peers.length === 2 ? true : undefined;
    });
  }

  const masterPort = async () => Number(((await ask(s1!, 'GET-MASTER-ADDR-BY-NAME', masterName)) as string[])[1]);
  const lab: SentinelLab = {
    masterName,
    sentinels: sentinelPorts.map((p) => `127.0.0.1:${p}`).join(','),
    masterPort,
    async master() {
      const r = new Redis({ port: await masterPort(), host: '127.0.0.1', maxRetriesPerRequest: 1 });
      r.on('error', () => {});
      opened.push(r);
      return r;
    },
    async failover() {
      const from = await masterPort();
      // Ready for a failover: the replica is linked to the master and known to the sentinels as ok.
      await until('a replica ready to be promoted', async () => {
        const replicas = (await ask(s1!, 'REPLICAS', masterName)) as string[][];
        const fields = replicas.map((r) => Object.fromEntries(r.flatMap((v, i, a) => (i % 2 === 0 ? [[v, a[i + 1]]] : []))));
        return fields.some((f) => f['master-link-status'] === 'ok' && !String(f.flags).includes('down')) ? true : undefined;
      });
      await until('SENTINEL FAILOVER accepted', async () => ((await ask(s1!, 'FAILOVER', masterName)) === 'OK' ? true : undefined));
      // A forced failover that a loaded machine lets time out (failover-timeout 10 s) is not
      // retried by the sentinels themselves: ask again every 12 s until a new master is named.
      let askedAt = Date.now();
      const to = await until('the sentinels to name a new master', async () => {
        const port = await masterPort();
        if (port !== from) return port;
        if (Date.now() - askedAt > 12_000) {
          askedAt = Date.now();
          await ask(s1!, 'FAILOVER', masterName).catch(() => undefined);
        }
        return undefined;
      }, 60_000);
      await until('the new master to accept writes', () => withConnection(to, async (r) => ((await r.call('ROLE')) as string[])[0] === 'master' ? true : undefined));
      // The old master is demoted and replicates from the new one: from now on nothing can be
      // written to it (until then, a write it accepted would be lost in its resync).
      await until('the old master to replicate from the new one', () =>
        withConnection(from, async (r) => {
          const role = (await r.call('ROLE')) as unknown[];
          return role[0] === 'slave' && Number(role[2]) === to && role[3] === 'connected' ? true : undefined;
        }),
      );
      return { from, to };
    },
    async killMaster() {
      const from = await masterPort();
      byPort.get(from)!.kill('SIGKILL');
      const to = await until('the sentinels to promote the replica', async () => {
        const port = await masterPort();
        return port !== from ? port : undefined;
      });
      await until('the new master to accept writes', () => withConnection(to, async (r) => ((await r.call('ROLE')) as string[])[0] === 'master' ? true : undefined));
      return { from, to };
    },
    async stop() {
      for (const r of opened) r.disconnect();
      await Promise.all(
        procs.map(
          (p) =>
            new Promise<void>((resolve) => {
              if (p.exitCode !== null || p.signalCode !== null) return resolve();
              p.once('exit', () => resolve());
              p.kill('SIGKILL');
            }),
        ),
      );
      rmSync(dir, { recursive: true, force: true });
    },
  };
  return lab;
}
