/** What a CLI command may touch: its output streams, environment and a stop signal (tests run commands in-process). */
export interface CliIo {
  stdout: (text: string) => void;
  stderr: (text: string) => void;
  env: Record<string, string | undefined>;
  /** Colour only when stdout is a terminal (and NO_COLOR is unset). */
  isTTY: boolean;
  cwd: string;
  /** Aborted on SIGINT/SIGTERM (listen stops then). */
  signal: AbortSignal;
}

export const EXIT = {
  ok: 0,
  /** The server answered with an error (4xx/5xx), or a forwarded event was refused. */
  apiError: 1,
  /** Bad command line or missing credentials. */
  usage: 2,
  /** The server could not be reached. */
  unreachable: 3,
} as const;

export class UsageError extends Error {
  override name = 'UsageError';
}

export interface Paint {
  green(s: string): string;
  red(s: string): string;
  yellow(s: string): string;
  dim(s: string): string;
  bold(s: string): string;
}

export function paint(io: CliIo): Paint {
  const on = io.isTTY && !io.env.NO_COLOR;
  const wrap = (code: number) => (s: string) => (on ? `\u001b[${code}m${s}\u001b[0m` : s);
  return { green: wrap(32), red: wrap(31), yellow: wrap(33), dim: wrap(2), bold: wrap(1) };
}

/** Parsed command line: positionals and `--name value` / `--name=value` / boolean flags. */
export interface Args {
  positional: string[];
  flags: Map<string, string | true>;
}

const SHORT: Record<string, string> = { d: 'data', h: 'help', H: 'header' };

export function parseArgs(argv: readonly string[], booleans: ReadonlySet<string>): Args {
  const positional: string[] = [];
  const flags = new Map<string, string | true>();
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]!;
    if (a === '--') {
      positional.push(...argv.slice(i + 1));
      break;
    }
    let name: string | undefined;
    let value: string | undefined;
    if (a.startsWith('--')) {
      const eq = a.indexOf('=');
      name = eq < 0 ? a.slice(2) : a.slice(2, eq);
      if (eq >= 0) value = a.slice(eq + 1);
    } else if (/^-[A-Za-z]$/.test(a)) {
      name = SHORT[a[1]!];
      if (!name) throw new UsageError(`unknown option ${a}`);
    }
    if (name === undefined) {
      positional.push(a);
      continue;
    }
    if (value === undefined && !booleans.has(name)) {
      value = argv[++i];
      if (value === undefined) throw new UsageError(`--${name} needs a value`);
    }
    if (name === 'header' && flags.has('header')) value = `${flags.get('header')}\n${value}`;
    flags.set(name, value ?? true);
  }
  return { positional, flags };
}

export function str(args: Args, name: string): string | undefined {
  const v = args.flags.get(name);
  return typeof v === 'string' ? v : undefined;
}
