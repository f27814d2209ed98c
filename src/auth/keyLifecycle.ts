import type { Database, Sql } from '../db/db.js';
import { DomainError } from '../errors/catalog.js';
import { emitEvent } from '../events/outbox.js';
import type { Logger } from 'pino';
import type { Clock } from '../lib/clock.js';
import { periodicWorker } from '../lib/periodic.js';
import type { BackgroundWorker } from '../lib/worker.js';
import { newSecret } from '../lib/ids.js';
import { insertApiKey, type ApiKeyRow, type CreateApiKeyInput } from './apiKeys.js';
import { actorView, SYSTEM_ACTOR, writeAudit, type Actor } from './merchantAudit.js';
import { secretDigest } from './secrets.js';

/**
 * The life of an API key as its merchant manages it (docs/portal.md, docs/webhooks.md "API key
 * events"): create, rotate with a grace period, revoke, and the end of a grace. Each change, its
 * webhook event (outbox) and its audit row (merchant_audit_log) commit in one transaction. Every
 * UPDATE of api_keys fires auth_changed (migration 0610): each process drops its cached row at
 * commit, so a revocation holds at once everywhere; the grace's end is checked against the clock on
 * every request (src/auth/credentials.ts) and needs no notification.
 */

/** Default grace of a rotation, and its bound (the old secret works at most this long). */
export const DEFAULT_GRACE_SECONDS = 24 * 3600;
export const MAX_GRACE_SECONDS = 7 * 24 * 3600;
/** Graces ended per sweep (endGraces). */
const SWEEP_LIMIT = 100;

export const KEY_EVENTS = ['api_key.created', 'api_key.rotated', 'api_key.rotation_completed', 'api_key.revoked'] as const;
export type KeyEvent = (typeof KEY_EVENTS)[number];

/** Records the caller's own outcome (a portal form's) in the change's transaction. */
type RecordOutcome = (tx: Sql) => Promise<void>;

export interface KeyDeps {
  db: Database;
  clock: Clock;
  /** Real time for these security windows (AppContext.wallClock; default `clock`): the sandbox clock does not move them. */
  wallClock?: Clock;
}

/** The body of a key event (docs/webhooks.md): never a secret or its digest. */
export function keyEventPayload(key: ApiKeyRow, actor: Actor, at: Date): Record<string, unknown> {
  return {
    client_id: key.client_id,
    name: key.name,
    account_id: key.account_id === null ? null : Number(key.account_id),
    permissions: key.permissions,
    status: key.active ? 'active' : 'revoked',
    previous_secret_expires_at: key.previous_secret_expires_at ? key.previous_secret_expires_at.toISOString() : null,
    actor: actorView(actor),
    occurred_at: at.toISOString(),
  };
}

async function announce(tx: Sql, event: KeyEvent, key: ApiKeyRow, actor: Actor, at: Date, extra: Record<string, unknown> = {}): Promise<void> {
  const merchantId = Number(key.merchant_id);
  await emitEvent(tx, {
    event,
    merchantId,
    accountId: key.account_id === null ? null : Number(key.account_id),
    subject: key.client_id,
    payload: { ...keyEventPayload(key, actor, at), ...extra },
  });
  await writeAudit(tx, merchantId, actor, event, { client_id: key.client_id, ...extra }, at);
}

/** A new key of the merchant; its secret exists only in the returned value (shown once). */
export async function createKey(deps: KeyDeps, actor: Actor, input: CreateApiKeyInput & { record?: RecordOutcome }): Promise<{ key: ApiKeyRow; clientSecret: string }> {
  return deps.db.transaction(async (tx) => {
    const created = await insertApiKey(tx, input);
    await announce(tx, 'api_key.created', created.key, actor, (deps.wallClock ?? deps.clock).now());
    await input.record?.(tx);
    return created;
  });
}

/** The merchant's active key, locked; not found for another merchant's key (nothing revealed). */
async function lockKey(tx: Sql, merchantId: number | null, clientId: string): Promise<ApiKeyRow> {
  const [key] = await tx.query<ApiKeyRow>(
    'SELECT * FROM api_keys WHERE client_id = $1 AND ($2::bigint IS NULL OR merchant_id = $2) FOR UPDATE',
    [clientId, merchantId],
  );
  if (!key) throw new DomainError('not_found', { message: 'API key not found' });
  return key;
}

/**
 * A new secret for the key. The old one keeps working for `graceSeconds` (0…MAX_GRACE_SECONDS;
 * 0 refuses it at once); a grace still running from an earlier rotation ends now (only the
 * secret just replaced is kept). A revoked key cannot be rotated.
 */
export async function rotateKey(
  deps: KeyDeps,
  actor: Actor,
  merchantId: number,
  clientId: string,
  graceSeconds: number = DEFAULT_GRACE_SECONDS,
  record?: RecordOutcome,
): Promise<{ key: ApiKeyRow; clientSecret: string }> {
  if (!Number.isInteger(graceSeconds) || graceSeconds < 0 || graceSeconds > MAX_GRACE_SECONDS) {
    throw new DomainError('unprocessable_entity', { fields: { grace_seconds: [`must be a whole number of seconds from 0 to ${MAX_GRACE_SECONDS}`] } });
  }
  return deps.db.transaction(async (tx) => {
    const old = await lockKey(tx, merchantId, clientId);
    if (!old.active) throw new DomainError('conflict', { message: 'A revoked key cannot be rotated' });
    const now = (deps.wallClock ?? deps.clock).now();
    const clientSecret = newSecret('sk_');
    const graceEnd = graceSeconds > 0 ? new Date(now.getTime() + graceSeconds * 1000) : null;
    const [key] = await tx.query<ApiKeyRow>(
      `UPDATE api_keys SET secret_hash = $2, previous_secret_hash = $3, previous_secret_expires_at = $4, rotated_at = $5, updated_at = $5
        WHERE client_id = $1 RETURNING *`,
      [clientId, secretDigest(clientSecret), graceEnd ? old.secret_hash : null, graceEnd, now],
    );
    await announce(tx, 'api_key.rotated', key!, actor, now, { grace_seconds: graceSeconds });
    await record?.(tx);
    return { key: key!, clientSecret };
  });
}

/**
 * Revokes the key at once (its secret and any previous one in grace): every process refuses it
 * from the commit on. Revoking a revoked key changes nothing and fires nothing. `merchantId` null:
 * any merchant's key (the operator API).
 */
export async function revokeKey(deps: KeyDeps, actor: Actor, merchantId: number | null, clientId: string): Promise<ApiKeyRow> {
  return deps.db.transaction(async (tx) => {
    const old = await lockKey(tx, merchantId, clientId);
    if (!old.active) return old;
    const now = (deps.wallClock ?? deps.clock).now();
    const [key] = await tx.query<ApiKeyRow>(
      `UPDATE api_keys SET active = false, revoked_at = COALESCE(revoked_at, $2), previous_secret_hash = NULL, previous_secret_expires_at = NULL, updated_at = $2
        WHERE client_id = $1 RETURNING *`,
      [clientId, now],
    );
    await announce(tx, 'api_key.revoked', key!, actor, now);
    return key!;
  });
}

/**
 * Ends the graces that are over: forgets the previous secret's digest and fires
 * `api_key.rotation_completed`, at most SWEEP_LIMIT keys a call (the webhook workers' periodic
 * sweep and the keys page call it). Authentication does not wait for it: it already refuses the
 * old secret once its time is past. Returns the keys whose grace ended.
 */
export async function endGraces(deps: KeyDeps, merchantId: number | null = null): Promise<ApiKeyRow[]> {
  return deps.db.transaction(async (tx) => {
    const now = (deps.wallClock ?? deps.clock).now();
    const ended = await tx.query<ApiKeyRow & { ended_at: Date }>(
      `UPDATE api_keys k SET previous_secret_hash = NULL, previous_secret_expires_at = NULL
         FROM (SELECT client_id, previous_secret_expires_at FROM api_keys
                WHERE previous_secret_expires_at <= $1 AND ($2::bigint IS NULL OR merchant_id = $2)
                ORDER BY previous_secret_expires_at LIMIT $3 FOR UPDATE SKIP LOCKED) due
        WHERE k.client_id = due.client_id
        RETURNING k.*, due.previous_secret_expires_at AS ended_at`,
      [now, merchantId, SWEEP_LIMIT],
    );
    for (const key of ended) {
      await announce(tx, 'api_key.rotation_completed', key, SYSTEM_ACTOR, now, { grace_ended_at: key.ended_at.toISOString() });
    }
    return ended;
  });
}

/** How often the background sweep ends graces (the event may come up to this late; authentication never does). */
export const GRACE_SWEEP_MS = 60_000;

/** The sweep of endGraces, with the other background loops (src/server.ts). */
export function graceWorker(deps: KeyDeps & { log: Logger }): BackgroundWorker {
  return periodicWorker('api-key-graces', GRACE_SWEEP_MS, deps.log, () => endGraces(deps));
}

/** A key of the keys page: the row without digests, with its last use. */
export interface KeyListing {
  client_id: string;
  name: string;
  account_id: number | null;
  permissions: string[];
  ip_whitelist: string[];
  active: boolean;
  created_at: Date;
  rotated_at: Date | null;
  revoked_at: Date | null;
  expires_at: Date | null;
  previous_secret_expires_at: Date | null;
  last_used_at: Date | null;
  last_used_ip: string | null;
}

export async function listKeys(sql: Sql, merchantId: number): Promise<KeyListing[]> {
  const rows = await sql.query<KeyListing>(
    `SELECT k.client_id, k.name, k.account_id, k.permissions, k.ip_whitelist, k.active, k.created_at, k.rotated_at, k.revoked_at,
            k.expires_at, k.previous_secret_expires_at, u.last_used_at, u.last_used_ip
       FROM api_keys k LEFT JOIN api_key_usage u ON u.client_id = k.client_id
      WHERE k.merchant_id = $1
      ORDER BY k.active DESC, k.created_at DESC
      LIMIT 200`,
    [merchantId],
  );
  return rows.map((r) => ({ ...r, account_id: r.account_id === null ? null : Number(r.account_id) }));
}
