import { z } from 'zod';
import { EVENT_CATALOG } from '../../events/catalog.js';
import { int, named, nonNegative, timestamp, WorkedFalseError } from '../../http/apiSchemas.js';
import { defineRoutes } from '../../http/routeSpec.js';
import { queryInt } from '../../http/listParams.js';
import { webhookFields } from '../../webhooks/registration.js';

/** Any UUID (8-4-4-4-12 hex); ids of pixgate webhooks are v4, other versions are simply not found. */
export const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

const EVENT_NAMES = EVENT_CATALOG.map((e) => e.event) as [string, ...string[]];

/** The registration as the document states it: `events` is a non-empty list of catalog names. */
export const webhookRegistration = webhookFields.extend({
  url: webhookFields.shape.url.describe('https URL (http only with allow_insecure); public destinations only unless listed in WEBHOOK_ALLOWED_HOSTS'),
  events: z.array(z.enum(EVENT_NAMES)).min(1),
  secret: webhookFields.shape.secret.describe('Signing secret (generated when absent)'),
});

const CreatedWebhook = named(
  'WebhookCreated',
  z.object({
    worked: z.literal(true),
    id: z.string(),
    url: z.string(),
    events: z.array(z.string()),
    secret: z.string(),
    description: z.string().nullable(),
    is_active: z.boolean(),
    created_at: timestamp,
  }),
);
const ListedWebhook = named(
  'Webhook',
  z.object({
    id: z.string(),
    url: z.string(),
    events: z.array(z.string()),
    secret: z.string(),
    description: z.string().nullable(),
    account_id: int.nullable(),
    is_active: z.boolean(),
    allow_insecure: z.boolean(),
    status: z.enum(['active', 'inactive']),
    created_at: z.string().describe('Timestamp without zone (UTC)'),
    updated_at: z.string().describe('Timestamp without zone (UTC)'),
  }),
);
const CatalogEntry = named(
  'EventCatalogEntry',
  z.object({
    event: z.string(),
    status: z.string(),
    description: z.string(),
    firing: z.enum(['active', 'subscribable', 'alias', 'manual']),
    alias_of: z.string().nullable(),
  }),
);

export const webhooksApi = defineRoutes({
  create: {
    method: 'POST',
    path: '/webhooks',
    operationId: 'createWebhook',
    tag: 'Webhooks',
    summary: 'Register a webhook',
    description:
      'A webhook registered with an account key receives that account’s events; one registered with a merchant-wide key, every event of the merchant. At most 25 per merchant.',
    permission: 'account:write',
    signed: true,
    body: webhookRegistration,
    bodyExample: { url: 'https://example.com/pixgate', events: ['pix.payout.confirmed', 'pix.charge.paid'] },
    responses: {
      201: { description: 'Registered; `secret` signs every delivery', schema: CreatedWebhook },
      400: { description: 'Malformed body, invalid or missing events' },
      422: { description: 'Insecure or private destination; webhook limit reached', schema: WorkedFalseError },
    },
  },
  list: {
    method: 'GET',
    path: '/webhooks',
    operationId: 'listWebhooks',
    tag: 'Webhooks',
    summary: 'The webhooks the key sees',
    permission: 'account:read',
    responses: { 200: { description: 'The webhooks', schema: z.array(ListedWebhook) } },
  },
  catalog: {
    method: 'GET',
    path: '/webhooks/events',
    operationId: 'listWebhookEvents',
    tag: 'Webhooks',
    summary: 'The event catalog',
    permission: null,
    responses: { 200: { description: 'One entry per subscribable name', schema: z.array(CatalogEntry) } },
  },
  delete: {
    method: 'DELETE',
    path: '/webhooks/:id',
    operationId: 'deleteWebhook',
    tag: 'Webhooks',
    summary: 'Delete a webhook',
    permission: 'account:write',
    responses: { 204: { description: 'Deleted' }, 400: { description: 'id is not a UUID' }, 404: { description: 'webhook not found' } },
  },
});

// ---- operator routes (/api/admin/webhooks…) ----

const uuid = z.string().regex(UUID, 'must be a valid UUID').transform((s) => s.toLowerCase());
export const idParam = z.object({ id: uuid });
export const deliveryParam = z.object({ id: uuid, delivery_id: uuid });
const positiveInt = queryInt(1, Number.MAX_SAFE_INTEGER);
export const adminListQuery = z.strictObject({
  merchant_id: positiveInt.optional(),
  account_id: positiveInt.optional(),
  include_deleted: z.enum(['true', 'false']).optional(),
  limit: queryInt(1, 200).optional(),
});
export const patchBody = z.strictObject({ is_active: z.boolean() });
export const deliveriesQuery = z.strictObject({
  status: z.enum(['pending', 'delivered', 'failed', 'cancelled']).optional(),
  before: positiveInt.optional(),
  limit: queryInt(1, 200).optional(),
});

const counts = z.object({ pending: nonNegative, delivered: nonNegative, failed: nonNegative, cancelled: nonNegative });
const OperatorWebhook = named(
  'OperatorWebhook',
  z.object({
    id: z.string(),
    merchant_id: int,
    account_id: int.nullable(),
    client_id: z.string().nullable(),
    url: z.string(),
    events: z.array(z.string()),
    description: z.string().nullable(),
    is_active: z.boolean(),
    allow_insecure: z.boolean(),
    status: z.enum(['active', 'inactive', 'deleted']),
    created_at: timestamp.nullable(),
    updated_at: timestamp.nullable(),
    deleted_at: timestamp.nullable(),
    deliveries: counts.optional(),
  }),
);
const Attempt = z.object({
  attempt: int,
  started_at: timestamp.nullable(),
  duration_ms: int.nullable(),
  status_code: int.nullable(),
  error: z.string().nullable(),
  response_body: z.string().nullable(),
  worker: z.string().nullable(),
});
const Delivery = named(
  'WebhookDelivery',
  z.object({
    id: z.string(),
    webhook_id: z.string(),
    event: z.string(),
    event_id: z.string(),
    event_seq: int,
    subject: z.string().nullable(),
    status: z.enum(['pending', 'delivered', 'failed', 'cancelled']),
    attempt_count: nonNegative,
    next_attempt_at: timestamp.nullable(),
    last_status_code: int.nullable(),
    last_error: z.string().nullable(),
    event_created_at: timestamp.nullable(),
    created_at: timestamp.nullable(),
    delivered_at: timestamp.nullable(),
    failed_at: timestamp.nullable(),
    payload: z.record(z.string(), z.unknown()),
    attempts: z.array(Attempt),
  }),
);

const notFound = { 404: { description: 'webhook (or delivery) not found' } };
const tag = 'Operator: webhooks';
export const webhooksAdminApi = defineRoutes({
  list: {
    method: 'GET',
    path: '/webhooks',
    operationId: 'adminListWebhooks',
    tag,
    summary: 'Webhooks of every merchant, with delivery counts',
    query: adminListQuery,
    responses: { 200: { description: 'The webhooks', schema: z.object({ webhooks: z.array(OperatorWebhook) }) } },
  },
  get: {
    method: 'GET',
    path: '/webhooks/:id',
    operationId: 'adminGetWebhook',
    tag,
    summary: 'One webhook (deleted ones too)',
    params: idParam,
    responses: { 200: { description: 'The webhook', schema: OperatorWebhook }, ...notFound },
  },
  patch: {
    method: 'PATCH',
    path: '/webhooks/:id',
    operationId: 'adminPatchWebhook',
    tag,
    summary: 'Pause or resume a webhook',
    params: idParam,
    body: patchBody,
    responses: { 200: { description: 'The webhook', schema: OperatorWebhook }, ...notFound, 409: { description: 'webhook is deleted' } },
  },
  deliveries: {
    method: 'GET',
    path: '/webhooks/:id/deliveries',
    operationId: 'adminListDeliveries',
    tag,
    summary: 'Deliveries of a webhook with every attempt, newest first',
    params: idParam,
    query: deliveriesQuery,
    responses: {
      200: { description: 'One page; next_before is the cursor of the next', schema: z.object({ deliveries: z.array(Delivery), next_before: int.nullable() }) },
      ...notFound,
    },
  },
  delivery: {
    method: 'GET',
    path: '/webhooks/:id/deliveries/:delivery_id',
    operationId: 'adminGetDelivery',
    tag,
    summary: 'One delivery with its attempts',
    params: deliveryParam,
    responses: { 200: { description: 'The delivery', schema: Delivery }, ...notFound },
  },
  resend: {
    method: 'POST',
    path: '/webhooks/:id/deliveries/:delivery_id/resend',
    operationId: 'adminResendDelivery',
    tag,
    summary: 'Send a delivery again',
    params: deliveryParam,
    responses: { 202: { description: 'Queued again', schema: Delivery }, ...notFound, 409: { description: 'webhook deleted or delivery already pending' } },
  },
  test: {
    method: 'POST',
    path: '/webhooks/:id/test',
    operationId: 'adminTestWebhook',
    tag,
    summary: 'Fire a webhook.test delivery',
    params: idParam,
    responses: { 202: { description: 'The test delivery', schema: Delivery }, ...notFound, 409: { description: 'webhook deleted or inactive' } },
  },
});
