/**
 * What the HA lab (bench/ha/lab.ts) needs from the host: the Debian packages (installed when
 * missing), the templates of deploy/, files and processes of the postgres user, long-running
 * daemons in their own process groups, and waiting for a condition.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { chownSync, closeSync, existsSync, openSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { packageRoot } from '../../src/lib/paths.js';
import { MAIN, postgresBin, sleep } from '../chaos/infra.js';

/** The Debian packages of the lab and the command each provides. */
const PACKAGES: [pkg: string, command: string][] = [
  ['patroni', 'patroni'],
  ['etcd-server', 'etcd'],
  ['haproxy', 'haproxy'],
  ['pgbouncer', 'pgbouncer'],
  ['redis-sentinel', 'redis-sentinel'],
  ['redis-server', 'redis-server'],
];

const has = (cmd: string) => spawnSync('sh', ['-c', `command -v ${cmd} || test -x /usr/sbin/${cmd}`], { encoding: 'utf8' }).status === 0;

/**
 * Installs the missing Debian packages (apt-get, as root); the reason the lab cannot run, or
 * undefined when it can.
 */
export function ensurePrerequisites(log: (l: string) => void = console.error): string | undefined {
  const missing = PACKAGES.filter(([, cmd]) => !has(cmd)).map(([p]) => p);
  if (missing.length > 0) {
    if (process.getuid?.() !== 0) return `Debian packages missing (${missing.join(', ')}) and not root to install them`;
    log(`ha: installing ${missing.join(' ')} (apt-get)`);
    const env = { ...process.env, DEBIAN_FRONTEND: 'noninteractive' };
    const upd = spawnSync('apt-get', ['update', '-qq'], { stdio: 'inherit', env });
    const inst = spawnSync('apt-get', ['install', '-y', '-qq', '--no-install-recommends', ...missing], { stdio: 'inherit', env });
    if (upd.status !== 0 || inst.status !== 0) return `apt-get install ${missing.join(' ')} failed`;
    const still = PACKAGES.filter(([, cmd]) => !has(cmd)).map(([p]) => p);
    if (still.length > 0) return `still missing after apt-get: ${still.join(', ')}`;
  }
  if (!postgresBin()) return 'PostgreSQL binaries not found under /usr/lib/postgresql (postgresql-15)';
  if (process.getuid?.() === 0 && spawnSync('id', ['postgres']).status !== 0) return 'no postgres user to run Patroni and pgbouncer as';
  if (!existsSync(MAIN)) return `${MAIN} is missing: run npm run build`;
  return undefined;
}

/** A template of deploy/ with its {{NAME}} placeholders filled. */
export function render(template: string, values: Record<string, string | number>): string {
  const text = readFileSync(join(packageRoot, 'deploy', template), 'utf8');
  return text.replace(/\{\{(\w+)\}\}/g, (_, k: string) => {
    if (!(k in values)) throw new Error(`deploy/${template}: no value for {{${k}}}`);
    return String(values[k]);
  });
}

export const asRoot = () => process.getuid?.() === 0;
let postgresIds: { uid: number; gid: number } | undefined;
function postgresUser(): { uid: number; gid: number } {
  postgresIds ??= { uid: Number(spawnSync('id', ['-u', 'postgres'], { encoding: 'utf8' }).stdout.trim()), gid: Number(spawnSync('id', ['-g', 'postgres'], { encoding: 'utf8' }).stdout.trim()) };
  return postgresIds;
}
export const giveToPostgres = (path: string) => {
  if (asRoot()) chownSync(path, postgresUser().uid, postgresUser().gid);
};

/** A long-running child in its own process group, output appended to a log file. */
export class Daemon {
  proc: ChildProcess | undefined;
  constructor(
    readonly name: string,
    readonly command: string,
    readonly args: string[],
    readonly logFile: string,
    readonly asPostgres = false,
    private readonly refused: () => boolean = () => false,
  ) {}
  start(): void {
    if (this.refused()) return;
    const fd = openSync(this.logFile, 'a');
    const [cmd, args] = this.asPostgres && asRoot() ? ['runuser', ['-u', 'postgres', '--', this.command, ...this.args]] : [this.command, this.args];
    this.proc = spawn(cmd, args, { stdio: ['ignore', fd, fd], detached: true, env: { PATH: process.env.PATH ?? '/usr/bin:/bin', LANG: 'C.UTF-8', HOME: '/tmp' } });
    closeSync(fd);
  }
  alive(): boolean {
    return !!this.proc && this.proc.exitCode === null && this.proc.signalCode === null;
  }
  /** Signals the whole group and waits (up to `ms`) for the leader to exit. */
  async stop(signal: NodeJS.Signals = 'SIGTERM', ms = 15_000): Promise<void> {
    const p = this.proc;
    if (!p || !this.alive()) return;
    const exited = new Promise((r) => p.once('exit', r));
    try {
      process.kill(-p.pid!, signal);
    } catch {
      p.kill(signal);
    }
    await Promise.race([exited, sleep(ms)]);
    if (this.alive()) {
      try {
        process.kill(-p.pid!, 'SIGKILL');
      } catch {
        // gone
      }
      await Promise.race([exited, sleep(2000)]);
    }
  }
}
export async function waitFor(check: () => Promise<boolean>, timeoutMs: number, what: string): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      if (await check()) return;
    } catch {
      // not yet
    }
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(250);
  }
}

/** Whether the built pixgate reads an environment variable (a feature merged or not yet). */
export function pixgateSupports(variable: string): boolean {
  try {
    return readFileSync(join(packageRoot, 'dist', 'src', 'config.js'), 'utf8').includes(variable);
  } catch {
    return false;
  }
}
