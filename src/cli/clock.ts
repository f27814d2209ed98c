import { loadCredentials, requireAdmin } from './credentials.js';
import { EXIT, paint, UsageError, type Args, type CliIo } from './io.js';

const UNITS: Record<string, number> = { s: 1, m: 60, h: 3_600, d: 86_400, w: 604_800 };

/**
 * A duration as the CLI takes it: whole seconds (`90`), or one or more numbers with a unit —
 * s, m, h, d, w — run together (`2d`, `1h30m`, `45s`). Answers seconds, or null when it is not one.
 */
export function parseDuration(text: string): number | null {
  const t = text.trim().toLowerCase();
  if (/^\d+$/.test(t)) return Number(t);
  if (!/^(\d+[smhdw])+$/.test(t)) return null;
  let total = 0;
  for (const [, n, unit] of t.matchAll(/(\d+)([smhdw])/g)) total += Number(n) * UNITS[unit!]!;
  return Number.isSafeInteger(total) ? total : null;
}

function human(seconds: number): string {
  const parts: string[] = [];
  let rest = seconds;
  for (const [unit, size] of [['d', 86_400], ['h', 3_600], ['m', 60], ['s', 1]] as const) {
    const n = Math.floor(rest / size);
    if (n > 0) parts.push(`${n}${unit}`);
    rest -= n * size;
  }
  return parts.length ? parts.join(' ') : '0s';
}

/**
 * pixgate clock                — the sandbox clock: simulated now and how far it runs ahead
 * pixgate clock advance <dur>  — move simulated time forward (2d, 1h30m, 90) for the installation
 */
export async function clockCommand(args: Args, io: CliIo): Promise<number> {
  const [sub, amount, ...extra] = args.positional;
  let request: { method: string; path: string; body?: unknown };
  if (sub === undefined || sub === 'show') {
    request = { method: 'GET', path: '/clock' };
  } else if (sub === 'advance') {
    const seconds = amount === undefined ? null : parseDuration(amount);
    if (seconds === null || extra.length > 0) throw new UsageError('usage: pixgate clock advance <duration>, e.g. 2d, 1h30m, 90 (seconds)');
    request = { method: 'POST', path: '/clock/advance', body: { seconds } };
  } else {
    throw new UsageError(`unknown clock command "${sub}": pixgate clock [advance <duration>]`);
  }
  const creds = loadCredentials(args, io);
  const token = requireAdmin(creds);
  let res: Response;
  try {
    res = await fetch(`${creds.url}/api/sandbox${request.path}`, {
      method: request.method,
      headers: { authorization: `Bearer ${token}`, ...(request.body !== undefined ? { 'content-type': 'application/json' } : {}) },
      ...(request.body !== undefined ? { body: JSON.stringify(request.body) } : {}),
      signal: io.signal,
    });
  } catch (err) {
    io.stderr(`pixgate: could not reach ${creds.url}: ${(err as Error).message}\n`);
    return EXIT.unreachable;
  }
  const text = await res.text();
  if (res.status === 404) {
    io.stderr(`pixgate: ${creds.url} has no sandbox clock (APP_ENV=production, or a server older than the clock)\n`);
    return EXIT.apiError;
  }
  if (res.status !== 200) {
    io.stderr(`pixgate: clock: HTTP ${res.status} ${text}\n`);
    return EXIT.apiError;
  }
  const clock = JSON.parse(text) as { now: string; offset_seconds: number };
  if (args.flags.has('json')) io.stdout(JSON.stringify(clock) + '\n');
  else {
    const p = paint(io);
    if (sub === 'advance') io.stdout(`${p.green('Advanced')} ${human(request.body ? (request.body as { seconds: number }).seconds : 0)}\n`);
    io.stdout(`now     ${clock.now}\noffset  ${clock.offset_seconds} s (${human(clock.offset_seconds)} ahead of real time)\n`);
  }
  return EXIT.ok;
}
