import { z } from 'zod';
import { FEED_LIMIT_DEFAULT, FEED_LIMIT_MAX, MAX_STREAMS_PER_MERCHANT } from '../api/events/feed.routes.js';
import { baseUnits, FieldMapSchema, int, named, nonNegative, timestamp } from '../http/apiSchemas.js';
import { MAX_AMOUNT_CENTS } from '../lib/money.js';
import { DESCRIPTION_MAX } from '../pix/cashOutCommand.js';
import { EXTERNAL_ID, EXTERNAL_ID_MESSAGE } from '../pix/externalId.js';
import { PIX_KEY_TYPES } from '../pix/keys.js';
import { TEF_ERROR_CODES } from '../tef/tef.js';
import { defineRoutes } from '../http/routeSpec.js';
import { readerParam } from '../http/listParams.js';

/**
 * Declarations of TEF, the event feed, the rail stall switch and /metrics. TEF and the stall switch
 * mount these declarations; the feed and /metrics register themselves (a hand-written query reader;
 * an onRequest token check) and are checked against them by the contract test. TEF keeps its
 * hand-written parser (src/tef/tef.ts: its error order is part of the API); the body schemas below
 * are what it accepts, and every accepted request is checked against them.
 */
/** external_id: the rule of src/pix/externalId.ts (surrounding spaces are trimmed). */
const identifier = z.string().regex(new RegExp(`^\\s*${EXTERNAL_ID.source.slice(1, -1)}\\s*$`), EXTERNAL_ID_MESSAGE);

/** The fields src/tef/tef.ts `parseTef` accepts: exactly one of `account_id` and `pix_key`. */
const tefFields = {
  amount: z.number().int().min(1).max(MAX_AMOUNT_CENTS).describe('Amount in cents'),
  account_id: int.min(1).nullish().describe('An account of your merchant (or send `pix_key`)'),
  pix_key: z.string().nullish().describe('A PIX key of an account of this institution (or send `account_id`)'),
  pix_key_type: z.enum(PIX_KEY_TYPES).nullish().describe('Needed when an 11-digit key could be a CPF or a phone'),
  description: z.string().max(DESCRIPTION_MAX).nullish(),
  external_id: identifier.nullish().describe('Your id of the transfer: a repeat with the same payload answers the same transfer'),
};
export const tefBody = z.strictObject(tefFields);
export const tefAdminBody = z.strictObject({ from_account_id: int.min(1).describe('The source account'), ...tefFields });

const TefTransfer = named(
  'TefTransfer',
  z.object({
    worked: z.literal(true),
    final: z.literal(true),
    transaction_id: z.string(),
    external_id: z.string().nullable(),
    amount: baseUnits,
    fee_amount: baseUnits,
    net_amount: baseUnits,
    status: z.literal('settled'),
    from_account_id: int,
    to_account_id: int.nullable().describe('Null when the destination belongs to another merchant (named by its key)'),
    recipient: z.object({ name: z.string(), document: z.string(), pix_key: z.string().nullable() }),
    description: z.string().nullable(),
    created_at: timestamp,
    completed_at: timestamp.nullable(),
    detail: z.string(),
  }),
  'A settled TEF (docs/tef.md)',
);

/** The cash-out's error body; a recorded failure also carries the transfer's id, amount and `status: failed`. */
const TefError = named(
  'TefError',
  z.object({
    worked: z.literal(false),
    errors: z.record(z.string(), z.union([z.string(), FieldMapSchema])),
    code: z.enum(TEF_ERROR_CODES),
    detail: z.string(),
    final: z.literal(true).optional(),
    status: z.literal('failed').optional(),
    transaction_id: z.string().optional(),
    external_id: z.string().nullable().optional(),
    amount: baseUnits.optional(),
  }),
  'TEF errors: `code` names the case (docs/tef.md); `destination_inactive`, `destination_cannot_receive` and `insufficient_balance` are recorded failures and carry the transfer',
);

const tefResponses = {
  200: { description: 'Settled (or the same transfer again for a repeated external_id)', schema: TefTransfer },
  400: { description: 'Malformed body (field map under errors.bad_request); recorded failure `insufficient_balance`', schema: TefError },
  409: { description: '`external_id_conflict`: external_id used with a different payload', schema: TefError },
  422: {
    description:
      '`invalid_amount`, `unprocessable_entity` (key), `pix_key_ambiguous`, `destination_not_found`, `same_account`, limits, `account_inactive` (the source); recorded failures `destination_inactive`, `destination_cannot_receive`',
    schema: TefError,
  },
};

export const tefApi = defineRoutes({
  transfer: {
    method: 'POST',
    path: '/tef/transfers',
    operationId: 'tefTransfer',
    tag: 'TEF',
    summary: 'A transfer to another account of this institution (docs/tef.md)',
    description: 'Settles at once: both accounts’ books in one database transaction. The destination is an account of your merchant (`account_id`) or any account of this institution by its PIX key.',
    permission: 'transfer:write',
    signed: true,
    body: tefBody,
    bodyExample: { amount: 2500, account_id: 3, description: 'Reforço de caixa', external_id: 'tef-42' },
    responses: tefResponses,
    errorShape: 'operation',
  },
});
export const tefAdminApi = defineRoutes({
  transfer: {
    method: 'POST',
    path: '/tef/transfers',
    operationId: 'adminTefTransfer',
    tag: 'Operator',
    summary: 'The same TEF on the operator’s behalf, from `from_account_id`',
    body: tefAdminBody,
    bodyExample: { from_account_id: 2, amount: 2500, pix_key: 'loja@example.com' },
    responses: tefResponses,
    errorShape: 'operation',
  },
});

const Event = named(
  'FeedEvent',
  z.object({
    sequence: int.describe('The cursor: strictly increasing in the order events are final'),
    id: z.string().describe('The event’s UUID (the same in every delivery of it)'),
    event: z.string(),
    account_id: int.nullable(),
    subject: z.string(),
    created_at: timestamp,
    payload: z.record(z.string(), z.unknown()).describe('The delivery body as an object'),
    body: z.string().describe('The exact bytes a webhook delivery of this event carries'),
  }),
);
export const feedApi = defineRoutes({
  events: {
    method: 'GET',
    path: '/events',
    operationId: 'listEvents',
    tag: 'Webhooks',
    summary: 'The merchant’s events after a cursor (what its webhooks receive)',
    permission: 'account:read',
    query: z.object({
      after: readerParam(z.string().regex(/^\d{1,15}$/), 'Sequence number to read after (default 0, also when empty)'),
      limit: readerParam(z.string().regex(/^\d{1,9}$/), `1 to ${FEED_LIMIT_MAX} (default ${FEED_LIMIT_DEFAULT}, also when empty)`),
      type: z.string().optional().describe('Event names of the catalog, comma-separated (aliases read the event they stand for)'),
    }),
    responses: {
      200: { description: 'One page of events', schema: z.object({ worked: z.literal(true), events: z.array(Event), next_after: int, has_more: z.boolean() }) },
    },
  },
  stream: {
    method: 'GET',
    path: '/events/stream',
    operationId: 'streamEvents',
    tag: 'Webhooks',
    summary: 'The same events live, as Server-Sent Events (text/event-stream; Last-Event-ID resumes)',
    permission: 'account:read',
    query: z.object({
      after: readerParam(z.string().regex(/^\d{1,15}$/), 'Sequence number to start after (default, also when empty: the latest; the Last-Event-ID header wins)'),
      type: z.string().optional().describe('Event names of the catalog, comma-separated'),
    }),
    requestHeaders: [{ name: 'Last-Event-ID', required: false, description: 'Resume after this sequence number', schema: { type: 'string', pattern: '^\\d{1,15}$' } }],
    responses: {
      200: {
        description: 'text/event-stream: first a message with only `id: <starting sequence>` (a client that loses the connection resumes from it with Last-Event-ID), then `id: <sequence>`, `event: <name>`, `data: <FeedEvent JSON>` per event; comment heartbeats. The stream ends once its credentials would be refused (key revoked or expired, account or merchant inactive, permission or whitelist changed)',
        contentType: 'text/event-stream',
        eventData: Event,
      },
      429: { description: `More than ${MAX_STREAMS_PER_MERCHANT} streams of the merchant open at once (too_many_requests)` },
    },
  },
});

const Stall = named('RailStall', z.object({ delay_ms: nonNegative, drop: z.boolean() }));
/** At most an hour: a stall is a fault to exercise, not a state to keep. */
export const MAX_STALL_MS = 3_600_000;
export const stallBody = z.strictObject({
  delay_ms: z.number().int().min(0).max(MAX_STALL_MS).describe('How late the rail answers payment and return orders'),
  drop: z.boolean().optional().describe('Never answer (the order is still processed); default false'),
});
export const railApi = defineRoutes({
  getStall: {
    method: 'GET',
    path: '/rail/stall',
    operationId: 'sandboxGetRailStall',
    tag: 'Sandbox',
    summary: 'The rail stall switch’s setting',
    responses: { 200: { description: 'The setting', schema: Stall } },
  },
  putStall: {
    method: 'PUT',
    path: '/rail/stall',
    operationId: 'sandboxSetRailStall',
    tag: 'Sandbox',
    summary: 'Delay (or drop) the simulated rail’s answers; {delay_ms: 0, drop: false} clears it',
    body: stallBody,
    bodyExample: { delay_ms: 15000, drop: false },
    responses: { 200: { description: 'The setting', schema: Stall } },
  },
});

export const metricsApi = defineRoutes({
  metrics: {
    method: 'GET',
    path: '/metrics',
    operationId: 'metrics',
    tag: 'Health',
    summary: 'Prometheus metrics of this process (text format; admin bearer token)',
    responses: { 200: { description: 'Prometheus text exposition format', contentType: 'text/plain', schema: z.string() }, 401: { description: 'Missing or invalid admin token' }, 429: { description: 'Too many failed authentications' } },
  },
});
