import { spawn, spawnSync } from 'node:child_process';
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort, sleep } from '../../bench/chaos/infra.js';

/** The pgbouncer binary, or undefined (tests that need their own skip). */
export function pgbouncerBin(): string | undefined {
  const found = spawnSync('sh', ['-c', 'command -v pgbouncer || ls /usr/sbin/pgbouncer 2>/dev/null'], { encoding: 'utf8' });
  return found.status === 0 && found.stdout.trim() ? found.stdout.trim().split('\n')[0] : undefined;
}

export interface Pgbouncer {
  port: number;
  /** `target` with host and port replaced by pgbouncer's. */
  url: string;
  stop(): Promise<void>;
}

/**
 * A pgbouncer of the test's own in transaction mode (as .ci/run starts for the suites), in front of
 * the PostgreSQL of `target`: trust authentication, any user known to PostgreSQL (auth_user
 * postgres looks users up), one pool per database and user. pgbouncer refuses to run as root: as
 * root it runs as the postgres user.
 */
export async function startPgbouncer(target: string, settings: Record<string, string> = {}): Promise<Pgbouncer> {
  const bin = pgbouncerBin();
  if (!bin) throw new Error('pgbouncer is not installed');
  const t = new URL(target);
  const dir = mkdtempSync(join(tmpdir(), 'pixgate-pgbouncer-'));
  chmodSync(dir, 0o777);
  const port = await freePort();
  writeFileSync(join(dir, 'users.txt'), '"postgres" ""\n');
  writeFileSync(
    join(dir, 'pgbouncer.ini'),
    [
      '[databases]',
      `* = host=${t.hostname} port=${t.port || 5432}`,
      '[pgbouncer]',
      'listen_addr = 127.0.0.1',
      `listen_port = ${port}`,
      'unix_socket_dir =',
      'auth_type = trust',
      `auth_file = ${join(dir, 'users.txt')}`,
      'auth_user = postgres',
      'pool_mode = transaction',
      'max_client_conn = 1000',
      'default_pool_size = 10',
      'server_idle_timeout = 5',
      ...Object.entries(settings).map(([k, v]) => `${k} = ${v}`),
      '',
    ].join('\n'),
  );
  const asRoot = process.getuid?.() === 0;
  const args = [join(dir, 'pgbouncer.ini')];
  const child = spawn(asRoot ? 'runuser' : bin, asRoot ? ['-u', 'postgres', '--', bin, ...args] : args, { stdio: ['ignore', 'ignore', 'pipe'] });
  let err = '';
  child.stderr!.on('data', (c: Buffer) => (err += c.toString()));
  for (let i = 0; ; i++) {
    const up = await new Promise<boolean>((resolve) => {
      const s = connect(port, '127.0.0.1', () => {
        s.destroy();
        resolve(true);
      });
      s.on('error', () => resolve(false));
    });
    if (up) break;
    if (i > 100 || child.exitCode !== null) throw new Error(`pgbouncer did not start: ${err}`);
    await sleep(50);
  }
  const url = new URL(target);
  url.hostname = '127.0.0.1';
  url.port = String(port);
  return {
    port,
    url: url.toString(),
    async stop() {
      if (child.exitCode === null) {
        const exited = new Promise((r) => child.once('exit', r));
        child.kill('SIGTERM');
        await exited;
      }
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
