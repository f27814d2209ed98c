/** What the machine's processes use (Linux /proc): process trees, RSS, CPU time of the server, PostgreSQL and this client. */
import { readdirSync, readFileSync } from 'node:fs';

/** Every process id of the machine (Linux /proc). */
function allPids(): number[] {
  return readdirSync('/proc').filter((name) => /^\d+$/.test(name)).map(Number);
}

/** The fields of /proc/<pid>/stat after the command name (field 3, the state, first), or undefined if it is gone. */
function procStat(pid: number): string[] | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  } catch {
    return undefined;
  }
}

/** Children of `pid`, recursively (Linux /proc). */
export function descendants(pid: number): number[] {
  const byParent = new Map<number, number[]>();
  for (const child of allPids()) {
    const fields = procStat(child);
    if (!fields) continue; // gone meanwhile
    const ppid = Number(fields[1]);
    byParent.set(ppid, [...(byParent.get(ppid) ?? []), child]);
  }
  const out: number[] = [];
  const walk = (p: number) => {
    for (const c of byParent.get(p) ?? []) {
      out.push(c);
      walk(c);
    }
  };
  walk(pid);
  return out;
}

export function rssMb(pid: number): number | undefined {
  try {
    const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
    return m ? Number(m[1]) / 1024 : undefined;
  } catch {
    return undefined;
  }
}

const CLOCK_TICKS_PER_SECOND = 100; // USER_HZ of /proc/<pid>/stat on Linux

/** CPU seconds (user + system) a process has used so far (Linux /proc), or 0 if it is gone. */
function cpuSeconds(pid: number): number {
  const fields = procStat(pid);
  return fields ? (Number(fields[11]) + Number(fields[12])) / CLOCK_TICKS_PER_SECOND : 0; // utime, stime
}

/** The PostgreSQL server's processes on this machine (postmaster, backends, helpers), by name. */
function postgresPids(): number[] {
  return allPids().filter((pid) => {
    try {
      return readFileSync(`/proc/${pid}/comm`, 'utf8').startsWith('postgres');
    } catch {
      return false; // gone meanwhile
    }
  });
}

/** CPU seconds used during a run, by side: the server's processes, PostgreSQL's and this client. */
export interface CpuFigures {
  server: number;
  postgres: number;
  client: number;
}

export function cpuSnapshot(serverPids: number[]): { server: Map<number, number>; postgres: Map<number, number>; client: number } {
  const snap = (pids: number[]) => new Map(pids.map((pid) => [pid, cpuSeconds(pid)]));
  const own = process.cpuUsage();
  return { server: snap(serverPids), postgres: snap(postgresPids()), client: (own.user + own.system) / 1e6 };
}

/**
 * CPU used between two snapshots: PostgreSQL's is every process of the local server (the bench's
 * own database is the only busy one). Linux only; a process that started during the run (a new
 * backend, an autovacuum worker) counts whole, one that ended during it is not counted.
 */
export function cpuBetween(before: ReturnType<typeof cpuSnapshot>, after: ReturnType<typeof cpuSnapshot>): CpuFigures {
  const used = (a: Map<number, number>, b: Map<number, number>) => [...b].reduce((sum, [pid, s]) => sum + Math.max(0, s - (a.get(pid) ?? 0)), 0);
  return { server: used(before.server, after.server), postgres: used(before.postgres, after.postgres), client: after.client - before.client };
}
