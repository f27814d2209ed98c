#!/usr/bin/env node
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { apiCommand } from './api.js';
import { clockCommand } from './clock.js';
import { localCredentialsPath, readLocalCredentials } from './credentials.js';
import { EXIT, parseArgs, UsageError, type Args, type CliIo } from './io.js';
import { listenCommand } from './listen.js';
import { signCommand } from './sign.js';
import { SCENARIOS, triggerCommand } from './trigger.js';

const BOOLEANS = new Set(['help', 'json', 'v1', 'v2', 'explain', 'retry', 'camel', 'version']);

export const HELP = `pixgate — command line of the pixgate merchant API

Usage: pixgate <command> [options]

Commands:
  listen --forward-to URL [--events a,b] [--after N] [--webhook-secret S]
        Stream your events (GET /api/external/events/stream) and POST each one to URL, signed
        exactly like a webhook delivery (X-Service-Signature and Standard Webhooks headers).
        One line per event with your endpoint's answer. Ctrl-C stops.
  trigger <scenario>
        Drive the sandbox so that a scenario's events fire. Scenarios:
${Object.entries(SCENARIOS)
  .map(([n, s]) => `          ${n.padEnd(20)} ${s.describe}`)
  .join('\n')}
  api METHOD PATH [-d BODY | -d @file.json] [--v1] [-H 'name: value'] [--idempotency-key K] [--retry]
        A signed call (v2 unless --v1); prints status, headers and body. PATH is under /api/external.
  sign -d BODY [--path /pix/cash-out] [--method POST] [--v1] [--explain]
        The signature headers for a body; --explain prints the canonical body, the string signed
        and its SHA-256 (compare with the server's X-Signature-Canonical-SHA256 answer).
  clock [advance DURATION]
        The sandbox clock (docs/sandbox-clock.md): simulated now and how far it runs ahead of
        real time; "advance 2d" (or 1h30m, 90 for seconds) moves it forward for the whole
        installation, and every business deadline that falls due fires. Needs the admin token.
  local-credentials [--data-dir DIR]
        The admin token and demo API key of a local server (APP_ENV=local), kept in DIR
        (default $DATA_DIR or ./data).
  help  This text.

Credentials (first found wins): flags --url --client-id --client-secret --admin-token
--webhook-secret; environment PIXGATE_URL PIXGATE_CLIENT_ID PIXGATE_CLIENT_SECRET
PIXGATE_ADMIN_TOKEN PIXGATE_WEBHOOK_SECRET; a profile (--profile NAME, default "default") in
$PIXGATE_PROFILE_FILE or ~/.config/pixgate/profiles.json; the local server's
<data dir>/local-credentials.json. URL default http://127.0.0.1:8080.

Options: --json (machine-readable output), --help. Colour only on a terminal (NO_COLOR turns it off).
Exit codes: 0 ok, 1 the server answered an error, 2 bad usage or missing credentials,
3 the server could not be reached.
`;

function localCredentialsCommand(args: Args, io: CliIo): number {
  const c = readLocalCredentials(args, io);
  if (!c) {
    io.stderr(`pixgate: ${localCredentialsPath(args, io)} not found: start the server once with APP_ENV=local (npm start)\n`);
    return EXIT.usage;
  }
  if (args.flags.has('json')) io.stdout(JSON.stringify(c) + '\n');
  else {
    io.stdout(`url            ${c.url ?? 'http://127.0.0.1:8080'}\n`);
    if (c.admin_token) io.stdout(`admin_token    ${c.admin_token}\n`);
    if (c.demo) {
      io.stdout(`merchant_id    ${c.demo.merchant_id}\naccount_id     ${c.demo.account_id}\nclient_id      ${c.demo.client_id}\nclient_secret  ${c.demo.client_secret}\n`);
      io.stdout(`pix keys       ${c.demo.pix_keys.join(', ')}\n`);
    }
  }
  return EXIT.ok;
}

/** Runs one command line; answers the exit code. */
export async function runCli(argv: readonly string[], io: CliIo): Promise<number> {
  try {
    const args = parseArgs(argv, BOOLEANS);
    const [command, ...rest] = args.positional;
    args.positional = rest;
    if (args.flags.has('version')) {
      const pkg = JSON.parse(readFileSync(fileURLToPath(new URL('../../../package.json', import.meta.url)), 'utf8')) as { version: string };
      io.stdout(`pixgate ${pkg.version}\n`);
      return EXIT.ok;
    }
    if (!command || command === 'help' || args.flags.has('help')) {
      io.stdout(HELP);
      return command && command !== 'help' && !args.flags.has('help') ? EXIT.usage : EXIT.ok;
    }
    switch (command) {
      case 'listen':
        return await listenCommand(args, io);
      case 'trigger':
        return await triggerCommand(args, io);
      case 'api':
        return await apiCommand(args, io);
      case 'sign':
        return await signCommand(args, io);
      case 'clock':
        return await clockCommand(args, io);
      case 'local-credentials':
        return localCredentialsCommand(args, io);
      default:
        throw new UsageError(`unknown command "${command}" (pixgate help)`);
    }
  } catch (err) {
    if (err instanceof UsageError) {
      io.stderr(`pixgate: ${err.message}\n`);
      return EXIT.usage;
    }
    throw err;
  }
}

const invoked = process.argv[1] && fileURLToPath(import.meta.url).replace(/\.ts$/, '.js') === process.argv[1].replace(/\.ts$/, '.js');
if (invoked || process.argv[1]?.endsWith('/pixgate')) {
  const controller = new AbortController();
  for (const sig of ['SIGINT', 'SIGTERM'] as const) process.once(sig, () => controller.abort());
  runCli(process.argv.slice(2), {
    stdout: (t) => process.stdout.write(t),
    stderr: (t) => process.stderr.write(t),
    env: process.env,
    isTTY: process.stdout.isTTY === true,
    cwd: process.cwd(),
    signal: controller.signal,
  }).then(
    (code) => {
      process.exitCode = code;
    },
    (err: unknown) => {
      process.stderr.write(`pixgate: ${(err as Error).stack ?? String(err)}\n`);
      process.exitCode = 70;
    },
  );
}
