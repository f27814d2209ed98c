import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { packageRoot } from '../../src/lib/paths.js';

export const MAIN = join(packageRoot, 'dist', 'src', 'main.js');

export interface PixgateProcess {
  proc: ChildProcess;
  /** Everything written to stdout and stderr so far. */
  output(): string;
  /** Resolves with the first match of `pattern` in the output, or rejects after `ms`. */
  waitFor(pattern: RegExp, ms?: number): Promise<RegExpMatchArray>;
  /** Resolves with the exit code (or signal) once the process has exited. */
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  url?: string;
}

/**
 * Every server a test file spawned is killed when the file ends, and when its test process exits,
 * even if a test failed or timed out before its own cleanup: an orphaned server (parent 1) would
 * keep polling its database and load the machine for the rest of the run.
 */
const spawned = new Set<ChildProcess>();
const alive = (p: ChildProcess) => p.exitCode === null && p.signalCode === null;
// Inside vitest only: the bench scripts (bench/idle.ts) start servers with this helper too, and
// importing vitest outside its runner throws.
if (process.env.VITEST) (await import('vitest')).afterAll(async () => {
  // SIGTERM first: a primary of WEB_CONCURRENCY > 1 stops its workers on it; SIGKILL after 5 s.
  const left = [...spawned].filter(alive);
  for (const p of left) p.kill('SIGTERM');
  await Promise.all(
    left.map((p) => Promise.race([new Promise((r) => p.once('exit', r)), new Promise((r) => setTimeout(r, 5_000))]).then(() => alive(p) && p.kill('SIGKILL'))),
  );
  spawned.clear();
});
process.once('exit', () => {
  for (const p of spawned) if (alive(p)) p.kill('SIGKILL');
});

/** Runs the built server (`npm start` runs the same file) as a child process. */
export function spawnPixgate(env: Record<string, string>): PixgateProcess {
  if (!existsSync(MAIN)) throw new Error(`${MAIN} is missing: run npm run build (npm test does)`);
  const proc = spawn(process.execPath, [MAIN], {
    env: { PATH: process.env.PATH ?? '', PORT: '0', LOG_LEVEL: 'info', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  spawned.add(proc);
  proc.once('exit', () => spawned.delete(proc));
  let out = '';
  const listeners = new Set<() => void>();
  const onData = (chunk: Buffer) => {
    out += chunk.toString('utf8');
    for (const l of listeners) l();
  };
  proc.stdout!.on('data', onData);
  proc.stderr!.on('data', onData);
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    proc.on('exit', (code, signal) => {
      for (const l of listeners) l();
      resolve({ code, signal });
    }),
  );
  const waitFor = (pattern: RegExp, ms = 60_000) =>
    new Promise<RegExpMatchArray>((resolve, reject) => {
      const check = () => {
        const m = out.match(pattern);
        if (m) {
          cleanup();
          resolve(m);
        } else if (proc.exitCode !== null || proc.signalCode !== null) {
          cleanup();
          reject(new Error(`process exited before ${pattern}; output:\n${out}`));
        }
      };
      const timer = setTimeout(() => {
        cleanup();
        reject(new Error(`timed out waiting for ${pattern}; output:\n${out}`));
      }, ms);
      const cleanup = () => {
        clearTimeout(timer);
        listeners.delete(check);
      };
      listeners.add(check);
      check();
    });
  return { proc, output: () => out, waitFor, exited };
}

/** Spawns and waits for the "listening" log line; sets `url`. */
export async function startPixgate(env: Record<string, string>): Promise<PixgateProcess> {
  const p = spawnPixgate(env);
  const m = await p.waitFor(/pixgate listening on (https?:\/\/[^"\s]+)/);
  p.url = m[1]!;
  return p;
}
