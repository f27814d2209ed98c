import { randomBytes } from 'node:crypto';
import { z } from 'zod';
import { EVENT_CATALOG, catalogEntry } from '../events/catalog.js';
import { DomainError } from '../errors/catalog.js';
import { parseFields } from '../errors/fields.js';
import { isoNaive } from '../lib/clock.js';
import { destinationProblem, type AllowedHost } from './destination.js';
import { webhookSecretProblem } from './standardWebhooks.js';
import type { WebhookRow } from './repository.js';

/** Most live webhooks one merchant may have (every event is fanned out to each matching one). */
export const MAX_WEBHOOKS_PER_MERCHANT = 25;

/** Longest webhook URL accepted. */
export const URL_MAX_LENGTH = 2048;

/** Fields of POST /webhooks; `events` is checked after the URL, its errors have their own shape (validateWebhook). */
export const webhookFields = z.strictObject({
  url: z.string().min(1).max(URL_MAX_LENGTH),
  events: z.unknown().optional(),
  secret: z.string().min(16).max(256).optional(),
  description: z.string().max(255).nullable().optional(),
  allow_insecure: z.boolean().optional(),
});

export interface WebhookInput {
  url: string;
  events: string[];
  secret: string;
  description: string | null;
  allowInsecure: boolean;
}

export const INVALID_EVENTS_PREFIX = 'contains invalid events:';

export const DETAIL = {
  insecure: 'URL must use HTTPS (HTTP is accepted only with allow_insecure: true)',
  privateDestination: (host: string, why: string, hostPort: string) =>
    `URL points to a private or reserved destination (${host}: ${why}); webhooks must reach a public address. ` +
    `To deliver to a receiver on your own machine or network, the operator lists it in the server setting WEBHOOK_ALLOWED_HOSTS ` +
    `(e.g. WEBHOOK_ALLOWED_HOSTS=${hostPort}) and an http URL also needs allow_insecure: true; ` +
    `or, without registering a webhook, run: pixgate listen --forward-to <your local URL>`,
} as const;

/** Generated secrets: `whsec_` + 256 random bits, standard base64 (the Standard Webhooks secret form). */
export function newWebhookSecret(): string {
  return `whsec_${randomBytes(32).toString('base64')}`;
}

function eventsError(message: string): DomainError {
  return new DomainError('invalid_events', { message });
}

function fieldError(field: string, message: string): DomainError {
  return new DomainError('bad_request', { fields: { [field]: [message] } });
}

/**
 * Validates a POST /webhooks body in the documented order (docs/webhooks.md):
 *  1. shape and types of url, secret, description, allow_insecure; unknown fields   400 bad_request field map
 *     a secret starting with whsec_ that is not its canonical Standard Webhooks form 400 bad_request field map
 *  2. url parses as an absolute URL without credentials                          400 bad_request field map
 *  3. scheme https, or http with allow_insecure                                   422 {worked: false, detail}
 *  4. events present and non-empty                                                400 {errors: {events: ["can't be blank"]}}
 *  5. events an array of strings, each in the catalog                             400 {errors: {events: ['contains invalid events: …']}}
 *  6. destination not private (unless in WEBHOOK_ALLOWED_HOSTS)                   422 {worked: false, detail}
 */
export function validateWebhook(input: unknown, allowed: readonly AllowedHost[]): WebhookInput {
  const fields = parseFields(webhookFields, input);
  const secretProblem = fields.secret === undefined ? undefined : webhookSecretProblem(fields.secret);
  if (secretProblem) throw fieldError('secret', secretProblem);
  let url: URL;
  try {
    url = new URL(fields.url);
  } catch {
    throw fieldError('url', 'is not a valid absolute URL');
  }
  if (url.username !== '' || url.password !== '') {
    throw fieldError('url', 'must not contain a user name or password');
  }
  if (url.port === '0') throw fieldError('url', 'must not use port 0');
  const allowInsecure = fields.allow_insecure ?? false;
  if (url.protocol !== 'https:' && !(url.protocol === 'http:' && allowInsecure)) throw new DomainError('webhook_url_refused', { detail: DETAIL.insecure });

  const events = fields.events;
  if (events === undefined || events === null || (Array.isArray(events) && events.length === 0)) throw eventsError("can't be blank");
  if (!Array.isArray(events) || events.some((e) => typeof e !== 'string')) throw eventsError('must be an array of event names');
  const unique = [...new Set(events as string[])];
  const invalid = unique.filter((e) => catalogEntry(e) === undefined);
  if (invalid.length > 0) throw eventsError(`${INVALID_EVENTS_PREFIX} ${invalid.join(', ')}`);

  const problem = destinationProblem(url, allowed);
  if (problem !== null) throw new DomainError('webhook_url_refused', { detail: DETAIL.privateDestination(url.hostname, problem, url.host) });

  url.hash = ''; // never sent; not part of the destination
  return {
    url: url.href,
    events: unique,
    secret: fields.secret ?? newWebhookSecret(),
    description: fields.description ?? null,
    allowInsecure,
  };
}

/** The create form (201): the spec's fields without the list-only ones, created_at with Z. */
export function createView(w: WebhookRow) {
  return {
    worked: true,
    id: w.id,
    url: w.url,
    events: w.events,
    secret: w.secret,
    description: w.description,
    is_active: w.is_active,
    created_at: w.created_at.toISOString(),
  };
}

/** The list form (GET /webhooks): every field, naive timestamps, status derived from is_active. */
export function listView(w: WebhookRow) {
  return {
    id: w.id,
    url: w.url,
    events: w.events,
    secret: w.secret,
    description: w.description,
    account_id: w.account_id,
    is_active: w.is_active,
    allow_insecure: w.allow_insecure,
    status: w.is_active ? 'active' : 'inactive',
    created_at: isoNaive(w.created_at),
    updated_at: isoNaive(w.updated_at),
  };
}

/** GET /webhooks/events: the catalog, one entry per subscribable name. */
export function catalogView() {
  return EVENT_CATALOG.map((e) => ({
    event: e.event,
    status: e.status,
    description: e.description,
    firing: e.firing,
    alias_of: e.aliasOf ?? null,
  }));
}

/** [alias, event] pairs of the catalog, for the fan-out. */
export const EVENT_ALIASES: ReadonlyArray<readonly [string, string]> = EVENT_CATALOG.filter((e) => e.aliasOf !== undefined).map(
  (e) => [e.event, e.aliasOf!] as const,
);
