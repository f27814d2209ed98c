import { chmodSync, mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Config } from './config.js';
import type { DemoCredentials } from './seed.js';

/**
 * In APP_ENV=local on the embedded database, the generated admin token and the demo merchant's API
 * key are kept in `<DATA_DIR>/local-credentials.json` (mode 0600), so a restart keeps the same
 * admin token and the demo key can be read again (`pixgate local-credentials`; the CLI also uses the
 * file as its last source of credentials). Never in homologation or production, never with
 * DATABASE_URL, never for a token set through ADMIN_TOKEN.
 */
export const LOCAL_CREDENTIALS_FILE = 'local-credentials.json';

export interface StoredLocalCredentials {
  url?: string;
  admin_token?: string;
  demo?: { merchant_id: number; account_id: number; client_id: string; client_secret: string; pix_keys: string[] };
}

export function keepsLocalCredentials(config: Pick<Config, 'appEnv' | 'databaseUrl' | 'dataDir'>, injectedDatabase: boolean): boolean {
  return config.appEnv === 'local' && !injectedDatabase && config.databaseUrl === undefined && !config.dataDir.startsWith('memory://');
}

export function localCredentialsPath(dataDir: string): string {
  return join(dataDir, LOCAL_CREDENTIALS_FILE);
}

export function readLocalCredentials(dataDir: string): StoredLocalCredentials | undefined {
  try {
    const v = JSON.parse(readFileSync(localCredentialsPath(dataDir), 'utf8')) as unknown;
    return v && typeof v === 'object' ? (v as StoredLocalCredentials) : undefined;
  } catch {
    return undefined;
  }
}

export function writeLocalCredentials(dataDir: string, c: StoredLocalCredentials): void {
  mkdirSync(dataDir, { recursive: true });
  const path = localCredentialsPath(dataDir);
  const tmp = `${path}.tmp`;
  writeFileSync(tmp, JSON.stringify(c, null, 2) + '\n', { mode: 0o600 });
  chmodSync(tmp, 0o600);
  renameSync(tmp, path);
}

export function storedDemo(d: DemoCredentials): NonNullable<StoredLocalCredentials['demo']> {
  return { merchant_id: d.merchantId, account_id: d.accountId, client_id: d.clientId, client_secret: d.clientSecret, pix_keys: d.pixKeys };
}
