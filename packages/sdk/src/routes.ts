/**
 * Every merchant route the SDK calls (method, path under /api/external, Fastify-style params).
 * Tests check each against the server's routes and, when the server publishes one, against the
 * OpenAPI document (`/openapi.json`), so the SDK cannot drift from the API.
 */
export const SDK_ROUTES = [
  ['GET', '/balance'],
  ['POST', '/cpf/validate'],
  ['POST', '/pix/cash-out'],
  ['POST', '/pix/refund'],
  ['GET', '/pix/refund/:id'],
  ['POST', '/pix/cash-in'],
  ['GET', '/pix/cash-in/:id'],
  ['GET', '/pix/keys'],
  ['POST', '/tef/transfers'],
  ['GET', '/statement'],
  ['GET', '/transactions'],
  ['GET', '/transactions/:id'],
  ['GET', '/transactions/e2e/:e2e_id'],
  ['GET', '/transactions/tag/:tag'],
  ['GET', '/transactions/ref/:external_id'],
  ['GET', '/transactions/:id/receipt'],
  ['GET', '/med'],
  ['GET', '/med/:id'],
  ['POST', '/med/:id/defense'],
  ['POST', '/webhooks'],
  ['GET', '/webhooks'],
  ['DELETE', '/webhooks/:id'],
  ['GET', '/webhooks/events'],
  ['GET', '/events'],
  ['GET', '/events/stream'],
] as const;
