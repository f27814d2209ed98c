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

/** Runs the built server (`npm start` runs the same file) as a child process. */
export function spawnPixgate(env: Record<string, string>): PixgateProcess {
  if (!existsSync(MAIN)) throw new Error(`${MAIN} is missing: run npm run build (npm test does)`);
  const proc = spawn(process.execPath, [MAIN], {
    env: { PATH: process.env.PATH ?? '', PORT: '0', LOG_LEVEL: 'info', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
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
  const waitFor = (pattern: RegExp, ms = 30_000) =>
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
