import { createHash } from 'node:crypto';
import type { Sql } from '../db/db.js';

/**
 * The request's Idempotency-Key as an operation sees it (the port; src/external/idempotency.ts is
 * the store and the claims behind it): bind the key to the record an operation creates, record the
 * answer in the operation's transaction, and the error when a retry took the key over.
 */

/** This request no longer owns its Idempotency-Key (a retry took it over): nothing it wrote stays. */
export class IdempotencyLostError extends Error {
  override name = 'IdempotencyLostError';
}

/** An answer to record under a claim (id, owner token), written by the caller's own SQL. */
export interface PreparedAnswer {
  id: number;
  token: string;
  statusCode: number;
  body: string;
  /** Call once the caller's statement recorded it, with its transaction… */
  recordedIn(tx: Sql): void;
  /** …or, when that statement ran on its own (it committed when it returned), right after it. */
  recorded(): void;
}

/**
 * What an operation that creates a record needs from the request's Idempotency-Key; without a key
 * every member is a no-op and `resumes` is null.
 */
export interface IdempotencyBinding {
  /** The record an earlier attempt under this key created: continue it, create nothing. */
  readonly resumes: string | null;
  /** Binds the key to the record being created, inside the transaction that creates it. */
  bind(tx: Sql, resourceId: string): Promise<void>;
  /** Records the answer (2xx only) inside the operation's last transaction. */
  record(tx: Sql, statusCode: number, payload: unknown): Promise<void>;
  /**
   * Optional, for operations that fold the key's SQL into their own statements (the cash-out):
   * the claim (id, owner token) to bind, or null without a key…
   */
  readonly claim?: { id: number; token: string } | null;
  /** …and the answer to record (null: nothing to record — no key, or not a 2xx). */
  prepare?(statusCode: number, payload: unknown): PreparedAnswer | null;
}

/** The digest of a request's canonical body (what makes two requests under one key the same). */
export function requestHash(canonicalBody: string): string {
  return createHash('sha256').update(canonicalBody, 'utf8').digest('hex');
}
