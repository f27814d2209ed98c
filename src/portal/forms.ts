import { randomBytes } from 'node:crypto';
import type { Sql } from '../db/db.js';
import { requestHash, type IdempotencyClaim, type IdempotencyScope, type IdempotencyStore } from '../external/idempotency.js';

/**
 * One-time form ids (docs/portal.md, "A form runs once"). Every form the portal renders carries a
 * hidden `_form`: 128 random bits made when the page is rendered. Posting it claims the id in the
 * merchant API's idempotency store (src/external/idempotency.ts) under the scope (merchant, POST,
 * route, id), so the store's rules apply as they do to an `Idempotency-Key`: the first POST runs the
 * action; a repeat — a double click, a resubmitted form, two identical POSTs at once, in this
 * process or another — waits for the first and gets its outcome; a holder that died is taken over
 * after the lease. The outcome (a success or a refusal, with the page it leads to) is recorded in
 * the operation's own database transaction where the operation has one (TEF, charge), so a movement
 * never commits without it; otherwise right after the action.
 */
export const FORM_FIELD = '_form';

const FORM_ID = /^[A-Za-z0-9_-]{22}$/;

/** A new form id (base64url of 16 random bytes). */
export function newFormId(): string {
  return randomBytes(16).toString('base64url');
}

export function isFormId(value: unknown): value is string {
  return typeof value === 'string' && FORM_ID.test(value);
}

/**
 * What a form post led to: the one-time message and the page it is shown on. A repeat of the
 * form gets exactly this.
 */
export interface FormOutcome {
  kind: 'ok' | 'error';
  text: string;
  redirect: string;
  /** A refusal's field errors (field name → messages), shown next to the fields. */
  fields?: Record<string, string[]>;
}

/**
 * The request hash of every form claim. A form id names one form as rendered: whatever is posted
 * under it again (a resubmission, or the same page edited after going back) gets the first
 * outcome, so the hash does not depend on the fields.
 */
const FORM_HASH = requestHash('portal-form');

export type FormClaim =
  | { kind: 'claimed'; claim: IdempotencyClaim }
  | { kind: 'replay'; outcome: FormOutcome }
  | { kind: 'busy' };

export async function claimForm(store: IdempotencyStore, scope: IdempotencyScope): Promise<FormClaim> {
  const result = await store.claim(scope, FORM_HASH);
  switch (result.kind) {
    case 'claimed':
      return { kind: 'claimed', claim: result.claim };
    case 'replay':
      return { kind: 'replay', outcome: JSON.parse(result.answer.body) as FormOutcome };
    default:
      // 'mismatch' cannot happen (one hash for every form); treat it as a form still running.
      return { kind: 'busy' };
  }
}

/** Records an outcome under the claim inside the operation's transaction (throws if the claim was lost). */
export async function recordOutcome(claim: IdempotencyClaim, tx: Sql, outcome: FormOutcome): Promise<void> {
  await claim.record(tx, outcome.kind === 'ok' ? 200 : 422, JSON.stringify(outcome));
}

/** The outcome recorded in the operation's transaction, once that transaction committed. */
export function recordedOutcome(claim: IdempotencyClaim): FormOutcome | undefined {
  return claim.recorded ? (JSON.parse(claim.recorded.body) as FormOutcome) : undefined;
}

/** Stores the outcome of an action that did not record it in a transaction of its own. */
export async function completeForm(store: IdempotencyStore, claim: IdempotencyClaim, outcome: FormOutcome): Promise<void> {
  await store.complete(claim, { statusCode: outcome.kind === 'ok' ? 200 : 422, body: JSON.stringify(outcome) });
}
