import { z } from 'zod';
import { int, named } from '../http/apiSchemas.js';
import { defineRoutes } from '../http/routeSpec.js';

/**
 * Declarations of routes whose handlers still register themselves (TEF, the event feed, the rail
 * stall switch, /metrics): the document states them and the contract test checks their answers;
 * moving their request schemas here is the next step (docs/openapi.md).
 */
const TefTransfer = named(
  'TefTransfer',
  z.looseObject({ worked: z.literal(true), transaction_id: z.string(), status: z.literal('settled') }),
  'A settled TEF (docs/tef.md)',
);
const tefBody = z.looseObject({ amount: z.number().int().min(1).describe('Cents') });

export const tefApi = defineRoutes({
  transfer: {
    method: 'POST',
    path: '/tef/transfers',
    operationId: 'tefTransfer',
    tag: 'TEF',
    summary: 'A transfer to another account of this institution (docs/tef.md)',
    permission: 'transfer:write',
    signed: true,
    body: tefBody,
    responses: { 200: { description: 'Settled', schema: TefTransfer }, 404: { description: 'Destination not found' }, 409: { description: 'external_id used with a different payload' }, 422: { description: 'Refused (failed transfer)' } },
  },
});
export const tefAdminApi = defineRoutes({
  transfer: {
    method: 'POST',
    path: '/tef/transfers',
    operationId: 'adminTefTransfer',
    tag: 'Operator',
    summary: 'The same TEF on the operator’s behalf, from `from_account_id`',
    body: z.looseObject({ from_account_id: int, amount: z.number().int().min(1) }),
    responses: { 200: { description: 'Settled', schema: TefTransfer }, 404: { description: 'Destination not found' }, 409: { description: 'Conflict' }, 422: { description: 'Refused' } },
  },
});

const Event = z.looseObject({ sequence: int });
export const feedApi = defineRoutes({
  events: {
    method: 'GET',
    path: '/events',
    operationId: 'listEvents',
    tag: 'Webhooks',
    summary: 'The merchant’s events after a cursor (what its webhooks receive)',
    permission: 'account:read',
    query: z.object({
      after: z.string().regex(/^\d+$/).optional().describe('Sequence number to read after'),
      limit: z.string().regex(/^\d{1,9}$/).optional(),
      type: z.string().optional().describe('Event names, comma-separated'),
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
    query: z.object({ after: z.string().regex(/^\d+$/).optional(), type: z.string().optional() }),
    responses: { 200: { description: 'text/event-stream of events' } },
  },
});

const Stall = named('RailStall', z.looseObject({ delay_ms: int, drop: z.boolean() }));
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
    body: z.strictObject({ delay_ms: z.number().int().min(0).max(3_600_000), drop: z.boolean().optional() }),
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
    responses: { 200: { description: 'text/plain Prometheus exposition' }, 401: { description: 'Missing or invalid admin token' }, 429: { description: 'Too many failed authentications' } },
  },
});
