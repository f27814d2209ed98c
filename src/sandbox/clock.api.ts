import { z } from 'zod';
import { named } from '../http/apiSchemas.js';
import { defineRoutes } from '../http/routeSpec.js';
import { MAX_ADVANCE_SECONDS } from '../lib/sandboxClock.js';

/**
 * The sandbox clock (issue 28, docs/sandbox-clock.md): simulated time for the whole installation,
 * not served in production. Every business deadline follows it; security windows do not.
 */
export const advanceBody = z.strictObject({
  seconds: z
    .number()
    .int()
    .min(1) // forward only
    .max(MAX_ADVANCE_SECONDS)
    .describe('How far to move simulated time forward, in seconds (1 to 366 days)'),
});

const SandboxClock = named(
  'SandboxClock',
  z.object({
    now: z.string().describe('Simulated time now (ISO 8601, UTC)'),
    offset_seconds: z.number().int().describe('How far simulated time runs ahead of real time'),
  }),
);

const tag = 'Sandbox';
export const clockApi = defineRoutes({
  getClock: {
    method: 'GET',
    path: '/clock',
    operationId: 'sandboxGetClock',
    tag,
    summary: 'Simulated time of the installation and how far it runs ahead of real time',
    responses: { 200: { description: 'The clock', schema: SandboxClock } },
  },
  advanceClock: {
    method: 'POST',
    path: '/clock/advance',
    operationId: 'sandboxAdvanceClock',
    tag,
    summary: 'Move simulated time forward for every process; due deadlines (charge expiry, MED, refunds, boletos, webhook retries) fire',
    body: advanceBody,
    bodyExample: { seconds: 120 },
    responses: {
      200: { description: 'The clock after the advance', schema: SandboxClock },
      400: { description: 'seconds is not a whole number from 1 to 31622400, or the clock would pass 10 years ahead' },
    },
  },
});
