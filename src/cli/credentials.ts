import { readFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { join, resolve } from 'node:path';
import { str, UsageError, type Args, type CliIo } from './io.js';

/**
 * Where the CLI finds the server and its keys, first match wins for each value:
 *   1. flags          --url, --client-id, --client-secret, --admin-token, --webhook-secret
 *   2. environment    PIXGATE_URL, PIXGATE_CLIENT_ID, PIXGATE_CLIENT_SECRET, PIXGATE_ADMIN_TOKEN, PIXGATE_WEBHOOK_SECRET
 *   3. profile file   --profile NAME (default `default`) in PIXGATE_PROFILE_FILE or ~/.config/pixgate/profiles.json:
 *                     {"default": {"url": "…", "client_id": "…", "client_secret": "…", "admin_token": "…", "webhook_secret": "…"}}
 *   4. local server   <DATA_DIR or --data-dir or ./data>/local-credentials.json, written by a server in APP_ENV=local
 *   5. url default    http://127.0.0.1:8080
 */
export interface Credentials {
  url: string;
  clientId?: string;
  clientSecret?: string;
  adminToken?: string;
  webhookSecret?: string;
  /** Where each value came from (for `--verbose` and error messages). */
  sources: Record<string, string>;
}

export const LOCAL_CREDENTIALS_FILE = 'local-credentials.json';

export interface LocalCredentialsFile {
  url?: string;
  admin_token?: string;
  demo?: { merchant_id: number; account_id: number; client_id: string; client_secret: string; pix_keys: string[] };
}

function readJson(path: string): unknown {
  try {
    return JSON.parse(readFileSync(path, 'utf8'));
  } catch {
    return undefined;
  }
}

export function localCredentialsPath(args: Args, io: CliIo): string {
  const dir = str(args, 'data-dir') ?? io.env.DATA_DIR ?? './data';
  return resolve(io.cwd, dir, LOCAL_CREDENTIALS_FILE);
}

export function readLocalCredentials(args: Args, io: CliIo): LocalCredentialsFile | undefined {
  const v = readJson(localCredentialsPath(args, io));
  return v && typeof v === 'object' ? (v as LocalCredentialsFile) : undefined;
}

export function loadCredentials(args: Args, io: CliIo): Credentials {
  const profileName = str(args, 'profile') ?? io.env.PIXGATE_PROFILE ?? 'default';
  const profileFile = io.env.PIXGATE_PROFILE_FILE ?? join(io.env.HOME ?? homedir(), '.config', 'pixgate', 'profiles.json');
  const profiles = readJson(profileFile) as Record<string, Record<string, string>> | undefined;
  const profile = profiles?.[profileName];
  if (str(args, 'profile') && !profile) throw new UsageError(`profile "${profileName}" not found in ${profileFile}`);
  const local = readLocalCredentials(args, io);
  const sources: Record<string, string> = {};
  const pick = (name: string, flag: string, envName: string, profileKey: string, localValue?: string): string | undefined => {
    const candidates: Array<[string | undefined, string]> = [
      [str(args, flag), `--${flag}`],
      [io.env[envName], envName],
      [profile?.[profileKey], `profile ${profileName}`],
      [localValue, LOCAL_CREDENTIALS_FILE],
    ];
    for (const [v, source] of candidates) {
      if (v) {
        sources[name] = source;
        return v;
      }
    }
    return undefined;
  };
  const url = pick('url', 'url', 'PIXGATE_URL', 'url', local?.url) ?? 'http://127.0.0.1:8080';
  const out: Credentials = { url: url.replace(/\/+$/, ''), sources };
  const clientId = pick('clientId', 'client-id', 'PIXGATE_CLIENT_ID', 'client_id', local?.demo?.client_id);
  const clientSecret = pick('clientSecret', 'client-secret', 'PIXGATE_CLIENT_SECRET', 'client_secret', local?.demo?.client_secret);
  const adminToken = pick('adminToken', 'admin-token', 'PIXGATE_ADMIN_TOKEN', 'admin_token', local?.admin_token);
  const webhookSecret = pick('webhookSecret', 'webhook-secret', 'PIXGATE_WEBHOOK_SECRET', 'webhook_secret');
  if (clientId) out.clientId = clientId;
  if (clientSecret) out.clientSecret = clientSecret;
  if (adminToken) out.adminToken = adminToken;
  if (webhookSecret) out.webhookSecret = webhookSecret;
  return out;
}

export function requireKey(c: Credentials): { clientId: string; clientSecret: string } {
  if (!c.clientId || !c.clientSecret) {
    throw new UsageError('no API key: pass --client-id and --client-secret, set PIXGATE_CLIENT_ID and PIXGATE_CLIENT_SECRET, or use a profile (pixgate help)');
  }
  return { clientId: c.clientId, clientSecret: c.clientSecret };
}

export function requireAdmin(c: Credentials): string {
  if (!c.adminToken) throw new UsageError('no admin token (the sandbox needs it): pass --admin-token or set PIXGATE_ADMIN_TOKEN');
  return c.adminToken;
}
