import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { Pixgate, PixgateError, type ApiResponse } from '@pixgate/sdk';
import { loadCredentials, requireKey } from './credentials.js';
import { EXIT, paint, str, UsageError, type Args, type CliIo } from './io.js';

/** `-d '{…}'`, `-d @file.json` or `-d @-` (stdin is not read in-process: use a file). */
export function readData(args: Args, io: CliIo): string | undefined {
  const d = str(args, 'data');
  if (d === undefined) return undefined;
  if (d.startsWith('@')) {
    try {
      return readFileSync(d === '@-' ? 0 : resolve(io.cwd, d.slice(1)), 'utf8');
    } catch (err) {
      throw new UsageError(`cannot read ${d.slice(1)}: ${(err as Error).message}`);
    }
  }
  return d;
}

export function apiPath(p: string): string {
  if (!p.startsWith('/')) p = `/${p}`;
  return p.startsWith('/api/external/') ? p.slice('/api/external'.length) : p;
}

/** pixgate api METHOD PATH [-d BODY] [--v1] [-H 'name: value'] [--idempotency-key K] [--retry] [--json] */
export async function apiCommand(args: Args, io: CliIo): Promise<number> {
  const [method, path] = args.positional;
  if (!method || !path) throw new UsageError('usage: pixgate api METHOD PATH [-d BODY]');
  const creds = loadCredentials(args, io);
  const key = requireKey(creds);
  const body = readData(args, io);
  if (body !== undefined) {
    try {
      JSON.parse(body);
    } catch {
      throw new UsageError('-d must be JSON (the body is signed as canonical JSON)');
    }
  }
  const headers: Record<string, string> = {};
  for (const line of (str(args, 'header') ?? '').split('\n').filter(Boolean)) {
    const i = line.indexOf(':');
    if (i <= 0) throw new UsageError(`-H needs "name: value", got "${line}"`);
    headers[line.slice(0, i).trim().toLowerCase()] = line.slice(i + 1).trim();
  }
  const client = new Pixgate({ baseUrl: creds.url, ...key, signatureVersion: args.flags.has('v1') ? 'v1' : 'v2', breaker: false, ...(args.flags.has('camel') ? { keyCase: 'camel' as const } : {}) });
  let res: Pick<ApiResponse, 'status' | 'headers' | 'body'>;
  let code: number = EXIT.ok;
  try {
    const idem = str(args, 'idempotency-key');
    res = await client.request(method, apiPath(path), {
      ...(body !== undefined ? { body } : {}),
      ...(idem ? { idempotencyKey: idem } : {}),
      headers,
      retry: args.flags.has('retry'),
    });
  } catch (err) {
    if (!(err instanceof PixgateError) || err.status === null) {
      io.stderr(`pixgate: could not reach ${creds.url}: ${(err as Error).message}\n`);
      return EXIT.unreachable;
    }
    res = { status: err.status, headers: err.headers, body: err.body };
    code = EXIT.apiError;
  }
  if (args.flags.has('json')) {
    io.stdout(JSON.stringify({ status: res.status, headers: res.headers, body: res.body }) + '\n');
    return code;
  }
  const p = paint(io);
  const ok = res.status >= 200 && res.status < 300;
  io.stdout(`${(ok ? p.green : p.red)(p.bold(`HTTP ${res.status}`))}\n`);
  for (const [k, v] of Object.entries(res.headers)) io.stdout(`${p.dim(k)}: ${v}\n`);
  io.stdout('\n' + (typeof res.body === 'string' ? res.body : JSON.stringify(res.body, null, 2)) + '\n');
  return code;
}
