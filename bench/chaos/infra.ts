/**
 * Throwaway infrastructure of the fault-injection suite: its own PostgreSQL cluster (initdb in a
 * temporary folder), its own redis-server, and pixgate child processes. Nothing here touches the
 * machine's PostgreSQL or Redis: every port is a free one picked at start.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { chownSync, existsSync, mkdtempSync, openSync, readFileSync, readdirSync, rmSync, writeFileSync, closeSync } from 'node:fs';
import { connect, createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { packageRoot } from '../../src/lib/paths.js';

export const MAIN = join(packageRoot, 'dist', 'src', 'main.js');
export const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address() as { port: number };
      srv.close(() => resolve(port));
    });
    srv.on('error', reject);
  });
}

/** The bin folder of the newest PostgreSQL installed under /usr/lib/postgresql (or PG_BIN). */
export function postgresBin(): string | undefined {
  if (process.env.PG_BIN && existsSync(join(process.env.PG_BIN, 'initdb'))) return process.env.PG_BIN;
  const root = '/usr/lib/postgresql';
  if (!existsSync(root)) return undefined;
  const versions = readdirSync(root).filter((v) => existsSync(join(root, v, 'bin', 'initdb'))).sort((a, b) => Number(b) - Number(a));
  return versions[0] ? join(root, versions[0], 'bin') : undefined;
}

export function redisBin(): string | undefined {
  const found = spawnSync('sh', ['-c', 'command -v redis-server'], { encoding: 'utf8' });
  return found.status === 0 ? found.stdout.trim() : undefined;
}

/** Why the suite cannot run here, or undefined when it can. */
export function missingPrerequisite(): string | undefined {
  if (!postgresBin()) return 'PostgreSQL binaries (initdb, pg_ctl) not found under /usr/lib/postgresql (set PG_BIN)';
  if (!redisBin()) return 'redis-server not found on PATH';
  if (process.getuid?.() === 0 && spawnSync('id', ['postgres']).status !== 0) return 'running as root without a postgres user (initdb refuses root)';
  if (!existsSync(MAIN)) return `${MAIN} is missing: run npm run build`;
  return undefined;
}

/** Runs a PostgreSQL tool as the postgres user when we are root (initdb and pg_ctl refuse root). */
/** Asynchronous, so the receiver and the clients keep running while PostgreSQL stops and starts. */
function pgTool(tool: string, args: string[], timeoutMs = 90_000): Promise<{ status: number | null; out: string }> {
  const bin = join(postgresBin()!, tool);
  const asRoot = process.getuid?.() === 0;
  return new Promise((resolve) => {
    const child = spawn(asRoot ? 'runuser' : bin, asRoot ? ['-u', 'postgres', '--', bin, ...args] : args, { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    child.stdout!.on('data', (c: Buffer) => (out += c.toString()));
    child.stderr!.on('data', (c: Buffer) => (out += c.toString()));
    const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
    child.on('close', (status) => {
      clearTimeout(timer);
      resolve({ status, out });
    });
  });
}

export class PostgresCluster {
  readonly dir: string;
  readonly data: string;
  port = 0;
  private options = '';
  /** `extraOptions`: more `-c name=value` settings (e.g. shared_preload_libraries for profiling). */
  constructor(private readonly extraOptions = '') {
    this.dir = mkdtempSync(join(tmpdir(), 'pixgate-chaos-pg-'));
    this.data = join(this.dir, 'data');
    if (process.getuid?.() === 0) chownSync(this.dir, Number(spawnSync('id', ['-u', 'postgres'], { encoding: 'utf8' }).stdout.trim()), Number(spawnSync('id', ['-g', 'postgres'], { encoding: 'utf8' }).stdout.trim()));
  }

  get url(): string {
    return `postgres://postgres@127.0.0.1:${this.port}/postgres`;
  }

  async init(): Promise<void> {
    this.port = await freePort();
    const r = await pgTool('initdb', ['-D', this.data, '-A', 'trust', '-U', 'postgres', '-E', 'UTF8', '--no-instructions']);
    if (r.status !== 0) throw new Error(`initdb failed:\n${r.out}`);
    this.options = `-c port=${this.port} -c listen_addresses=127.0.0.1 -c unix_socket_directories=${this.dir} -c max_connections=200 -c shared_buffers=32MB ${this.extraOptions}`.trim();
    await this.start();
  }

  async start(): Promise<void> {
    const r = await pgTool('pg_ctl', ['-D', this.data, '-l', join(this.dir, 'postgres.log'), '-o', this.options, '-w', '-t', '60', 'start']);
    if (r.status !== 0) throw new Error(`pg_ctl start failed:\n${r.out}`);
  }

  async stop(mode: 'fast' | 'immediate'): Promise<void> {
    const r = await pgTool('pg_ctl', ['-D', this.data, '-m', mode, '-w', '-t', '60', 'stop']);
    if (r.status !== 0) throw new Error(`pg_ctl stop failed:\n${r.out}`);
  }

  /**
   * SIGKILL of the postmaster (a crash, no shutdown at all): its backends notice and exit by
   * themselves; until they have, a new postmaster refuses to start (shared memory still in use),
   * so `start` after this is retried by `restartAfterCrash`.
   */
  sigkillPostmaster(): number {
    const pid = Number(readFileSync(join(this.data, 'postmaster.pid'), 'utf8').split('\n')[0]);
    process.kill(pid, 'SIGKILL');
    return pid;
  }

  /** Starts again after a crash, retrying while the old backends still hold the shared memory. */
  async restartAfterCrash(timeoutMs = 90_000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      try {
        return await this.start();
      } catch (err) {
        if (Date.now() > deadline) throw err;
        await sleep(300);
      }
    }
  }

  async destroy(): Promise<void> {
    await pgTool('pg_ctl', ['-D', this.data, '-m', 'immediate', '-w', 'stop']);
    rmSync(this.dir, { recursive: true, force: true });
  }
}

export class RedisServer {
  port = 0;
  private proc: ChildProcess | undefined;
  async start(): Promise<void> {
    if (!this.port) this.port = await freePort();
    const proc = spawn(redisBin()!, ['--port', String(this.port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'], { stdio: 'ignore' });
    this.proc = proc;
    const deadline = Date.now() + 10_000;
    for (;;) {
      if (await tcpOpen(this.port)) return;
      if (Date.now() > deadline || proc.exitCode !== null) throw new Error('redis-server did not start');
      await sleep(50);
    }
  }
  get url(): string {
    return `redis://127.0.0.1:${this.port}`;
  }
  /** Freezes redis-server (SIGSTOP): connections stay open and nothing answers, as on a hung host or a partition without RST. */
  hang(): void {
    this.proc?.kill('SIGSTOP');
  }
  resume(): void {
    this.proc?.kill('SIGCONT');
  }
  async stop(): Promise<void> {
    const p = this.proc;
    if (!p || p.exitCode !== null || p.signalCode !== null) return;
    const exited = new Promise((r) => p.once('exit', r));
    p.kill('SIGCONT');
    p.kill('SIGTERM');
    await exited;
    this.proc = undefined;
  }
}

function tcpOpen(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = connect(port, '127.0.0.1');
    s.once('connect', () => (s.destroy(), resolve(true)));
    s.once('error', () => (s.destroy(), resolve(false)));
  });
}

/** One pixgate process (`node dist/src/main.js`), its output appended to a log file. */
export class PixgateServer {
  proc: ChildProcess | undefined;
  readonly port: number;
  starts = 0;
  /** Exits we did not cause (not a SIGKILL or SIGTERM from this harness). */
  unexpectedExits: { at: number; code: number | null; signal: string | null }[] = [];
  private expectingExit = false;
  constructor(
    readonly env: Record<string, string>,
    port: number,
    readonly logFile: string,
    /** Node options before the script (e.g. `--import bench/chaos/wallClock.mjs`); cluster workers inherit them. */
    readonly nodeArgs: string[] = [],
  ) {
    this.port = port;
    closeSync(openSync(logFile, 'a'));
  }
  get url(): string {
    return `http://127.0.0.1:${this.port}`;
  }

  private spawnOnce(): ChildProcess {
    const fd = openSync(this.logFile, 'a');
    // Its own process group, so a SIGKILL takes the cluster workers with the primary, as a crash of the host would.
    const proc = spawn(process.execPath, [...this.nodeArgs, MAIN], {
      env: { PATH: process.env.PATH ?? '', ...this.env, PORT: String(this.port) },
      stdio: ['ignore', fd, fd],
      detached: true,
    });
    closeSync(fd);
    this.expectingExit = false;
    proc.once('exit', (code, signal) => {
      if (!this.expectingExit && this.proc === proc) this.unexpectedExits.push({ at: Date.now(), code, signal });
    });
    return proc;
  }

  /** Starts it and waits until /readyz answers 200 (retrying the spawn while it exits, e.g. while the database is down). */
  async start(timeoutMs = 120_000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      this.proc = this.spawnOnce();
      this.starts++;
      const proc = this.proc;
      while (proc.exitCode === null && proc.signalCode === null) {
        try {
          const r = await fetch(`${this.url}/readyz`, { signal: AbortSignal.timeout(1000) });
          if (r.status === 200) return;
        } catch {
          // not listening yet
        }
        if (Date.now() > deadline) throw new Error(`pixgate did not become ready (log ${this.logFile})`);
        await sleep(150);
      }
      // It exited during start-up (database not answering): that is expected while a fault lasts.
      this.unexpectedExits.pop();
      if (Date.now() > deadline) throw new Error(`pixgate kept exiting at start (log ${this.logFile})`);
      await sleep(500);
    }
  }

  alive(): boolean {
    return !!this.proc && this.proc.exitCode === null && this.proc.signalCode === null;
  }

  async kill(signal: 'SIGKILL' | 'SIGTERM'): Promise<void> {
    const p = this.proc;
    if (!p || p.exitCode !== null || p.signalCode !== null) return;
    this.expectingExit = true;
    const exited = new Promise((r) => p.once('exit', r));
    if (signal === 'SIGKILL') {
      try {
        process.kill(-p.pid!, 'SIGKILL');
      } catch {
        p.kill('SIGKILL');
      }
    } else p.kill(signal);
    await exited;
    if (signal === 'SIGKILL') await this.groupGone(p.pid!);
  }

  /** Pids of the cluster workers (children of the primary); empty when it runs alone. */
  workerPids(): number[] {
    const pid = this.proc?.pid;
    if (!pid || !this.alive()) return [];
    const r = spawnSync('ps', ['-o', 'pid=', '--ppid', String(pid)], { encoding: 'utf8' });
    return r.stdout.split('\n').map((l) => Number(l.trim())).filter((n) => n > 0);
  }

  /** SIGKILL of one cluster worker (the primary forks another); the pid killed, or undefined when there is none. */
  killWorker(pick: (n: number) => number): number | undefined {
    const pids = this.workerPids();
    if (pids.length === 0) return undefined;
    const pid = pids[pick(pids.length)]!;
    try {
      process.kill(pid, 'SIGKILL');
      return pid;
    } catch {
      return undefined;
    }
  }

  /** Workers die with the group; wait until none is left so the next start does not meet them. */
  private async groupGone(pgid: number): Promise<void> {
    for (let i = 0; i < 100; i++) {
      try {
        process.kill(-pgid, 0);
      } catch {
        return;
      }
      await sleep(20);
    }
  }
}

export function appendLine(file: string, line: string): void {
  writeFileSync(file, `${line}\n`, { flag: 'a' });
}
