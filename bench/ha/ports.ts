/**
 * The HA lab's ports, all from one block reserved for the lab (bench/ha/lab.ts).
 *
 * Why not "a free port" (listen on port 0, close, hand the number to a daemon that binds it later):
 * port 0 draws from the kernel's ephemeral range, the same range every outgoing connection takes
 * its local port from. Between the check and the daemon's bind — seconds on a loaded machine, and
 * Patroni binds PostgreSQL's port only when it starts it — one of the lab's own connections (a
 * client of pgbouncer, HAProxy's health checks, pg_basebackup) could take the number, and the
 * daemon failed with EADDRINUSE. Ports below the ephemeral range are never handed out that way:
 * only a process that binds the number explicitly can hold one.
 *
 * So a lab reserves a whole block below the ephemeral range: a lock file per block (several labs
 * or tests on one machine take different blocks; a lock left by a dead process is taken over), and
 * every port of the block is bound once to check that nobody listens there (a block with a port in
 * use is skipped). `take()` hands the block's ports out one by one, checking each again as it goes
 * (a port some foreign process bound since is skipped), and `release()` frees the block.
 */
import { chmodSync, closeSync, mkdirSync, openSync, readFileSync, rmSync, writeSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/** Ports per block: more than a lab takes (etcd 2, HAProxy 3, pgbouncer, 3 × Patroni 2, Redis 2, Sentinel 3, app nodes). */
export const BLOCK_SIZE = 40;
/** The lowest port a block may start at (above the usual well-known and registered services' ports). */
const LOWEST = 15_000;
const LOCK_DIR = join(tmpdir(), 'pixgate-ha-ports');

/** The kernel's ephemeral port range (Linux), or its default. */
export function ephemeralRange(): [number, number] {
  try {
    const [lo, hi] = readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').trim().split(/\s+/).map(Number);
    if (lo && hi) return [lo, hi];
  } catch {
    // not Linux
  }
  return [32_768, 60_999];
}

/** Whether `port` can be bound on 127.0.0.1 now (nobody listens there). */
export function canBind(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const srv = createServer();
    srv.once('error', () => resolve(false));
    srv.listen({ port, host: '127.0.0.1', exclusive: true }, () => srv.close(() => resolve(true)));
  });
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** Takes the lock of the block at `base`: true if taken (now, or over a dead holder). */
function lockBlock(base: number): boolean {
  const file = join(LOCK_DIR, `${base}.lock`);
  for (let attempt = 0; attempt < 2; attempt++) {
    try {
      const fd = openSync(file, 'wx');
      writeSync(fd, String(process.pid));
      closeSync(fd);
      return true;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
      const holder = Number(readFileSync(file, 'utf8').trim());
      if (holder > 0 && alive(holder)) return false;
      rmSync(file, { force: true }); // its holder died without releasing it
    }
  }
  return false;
}

export class PortBlock {
  private next = 0;
  private released = false;
  private constructor(readonly base: number) {}

  /**
   * Reserves a block of BLOCK_SIZE ports below the ephemeral range whose every port is free,
   * starting from a random block and trying the others in turn.
   */
  static async reserve(): Promise<PortBlock> {
    mkdirSync(LOCK_DIR, { recursive: true });
    try {
      chmodSync(LOCK_DIR, 0o1777); // shared by every user's labs (the umask narrowed mkdir's mode)
    } catch {
      // another user's folder: already shared
    }
    const [ephemeralLow] = ephemeralRange();
    const blocks = Math.floor((ephemeralLow - LOWEST) / BLOCK_SIZE);
    if (blocks < 1) throw new Error(`no room for a port block below the ephemeral range (${ephemeralLow})`);
    const first = Math.floor(Math.random() * blocks);
    for (let i = 0; i < blocks; i++) {
      const base = LOWEST + ((first + i) % blocks) * BLOCK_SIZE;
      if (!lockBlock(base)) continue;
      const free = await Promise.all(Array.from({ length: BLOCK_SIZE }, (_, k) => canBind(base + k)));
      if (free.every(Boolean)) return new PortBlock(base);
      rmSync(join(LOCK_DIR, `${base}.lock`), { force: true });
    }
    throw new Error(`no free block of ${BLOCK_SIZE} ports between ${LOWEST} and ${ephemeralLow}`);
  }

  /** The block's next port that nobody listens on. */
  async take(): Promise<number> {
    while (this.next < BLOCK_SIZE) {
      const port = this.base + this.next++;
      if (await canBind(port)) return port;
    }
    throw new Error(`port block ${this.base}-${this.base + BLOCK_SIZE - 1} used up`);
  }

  /** Frees the block for other labs (idempotent). */
  release(): void {
    if (this.released) return;
    this.released = true;
    rmSync(join(LOCK_DIR, `${this.base}.lock`), { force: true });
  }
}
