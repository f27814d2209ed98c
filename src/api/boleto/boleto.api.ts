import { z } from 'zod';
import { int, named, nonNegative, timestamp } from '../../http/apiSchemas.js';
import { defineRoutes, type RouteSpec } from '../../http/routeSpec.js';
import { BOLETO_ERRORS } from '../../http/boletoErrors.js';
import type { BoletoEndpoint } from './rateLimit.js';
import { BOLETO_STATUSES } from '../../boleto/repository.js';
import * as S from '../../boleto/schemas.js';

/** The boleto central API (/api/v1/central): its envelope, error body and routes. */
const meta = z.object({ request_id: z.string() });
const listMeta = z.object({ request_id: z.string(), count: nonNegative, next_cursor: z.string().nullable() });
const envelope = <T extends z.ZodType>(data: T, m: z.ZodType = meta) => z.object({ success: z.literal(true), data, meta: m });

export const BoletoErrorBody = named(
  'BoletoError',
  z.object({
    success: z.literal(false),
    error: z.object({
      code: z.enum(Object.keys(BOLETO_ERRORS) as [keyof typeof BOLETO_ERRORS, ...Array<keyof typeof BOLETO_ERRORS>]),
      message: z.string(),
      details: z.record(z.string(), z.unknown()),
    }),
    meta,
  }),
  'Every error of the boleto central API: `error.code` from a closed catalog, `details.fields` a field map for VALIDATION_ERROR',
);

const Boleto = named(
  'Boleto',
  z.object({
    nosso_numero: z.string(),
    status: z.enum(BOLETO_STATUSES),
    amount_cents: int,
    due_date: z.string(),
    payer_document: z.string(),
    payer_name: z.string(),
    beneficiary_ispb: z.string(),
    beneficiary_name: z.string(),
    beneficiary_account_id: int.nullable(),
    barcode: z.string(),
    linha_digitavel: z.string(),
    linha_digitavel_formatted: z.string(),
    paid_at: timestamp.nullable(),
    cancelled_at: timestamp.nullable(),
    settlement_id: z.string().nullable(),
    settled_at: timestamp.nullable(),
    created_at: timestamp,
    updated_at: timestamp,
  }),
);
const Settlement = named(
  'Settlement',
  z.object({
    id: z.string(),
    status: z.literal('settled'),
    beneficiary_ispb: z.string(),
    account_id: int.nullable(),
    boleto_count: nonNegative,
    amount_cents: int,
    transaction_id: z.string().nullable(),
    settled_at: timestamp,
    nosso_numeros: z.array(z.string()).optional(),
  }),
);
const BoletoResponse = named('BoletoResponse', envelope(Boleto));

const tag = 'Boleto central';
const rateHeaders = { 'X-RateLimit-Limit': 'Requests allowed in the window', 'X-RateLimit-Remaining': 'Requests left', 'X-RateLimit-Reset': 'Unix time the window resets' };
function route(endpoint: BoletoEndpoint, spec: Omit<RouteSpec, 'method' | 'path' | 'tag' | 'config'>): RouteSpec {
  const [method, path] = endpoint.split(' ') as [RouteSpec['method'], string];
  const responses = Object.fromEntries(Object.entries(spec.responses).map(([k, r]) => [k, Number(k) < 300 ? { headers: rateHeaders, ...r } : r]));
  return { method, path, tag, config: { boletoEndpoint: endpoint }, ...spec, responses };
}
const nn = { params: S.nossoNumeroParams };
const notFound = { 404: { description: 'Boleto not found' } };

export const boletoApi = defineRoutes({
  create: route('POST /boletos', {
    operationId: 'createBoleto',
    summary: 'Register a boleto',
    body: S.createBoleto,
    bodyExample: {
      boleto: {
        nosso_numero: '12345',
        amount_cents: 15000,
        due_date: '2026-12-31',
        payer_document: '52998224725',
        payer_name: 'Maria',
        beneficiary_ispb: '99999999',
        beneficiary_name: 'Padaria Central',
      },
    },
    responses: {
      201: { description: 'Registered', schema: BoletoResponse },
      409: { description: 'BOLETO_ALREADY_EXISTS' },
      422: { description: 'BENEFICIARY_ACCOUNT_REQUIRED' },
    },
  }),
  list: route('GET /boletos', {
    operationId: 'listBoletos',
    summary: 'Boletos of the key, newest first',
    query: S.listBoletosQuery,
    responses: { 200: { description: 'One page', schema: envelope(z.array(Boleto), listMeta) } },
  }),
  get: route('GET /boletos/:nosso_numero', {
    operationId: 'getBoleto',
    summary: 'One boleto',
    ...nn,
    responses: { 200: { description: 'The boleto', schema: BoletoResponse }, ...notFound },
  }),
  patch: route('PATCH /boletos/:nosso_numero', {
    operationId: 'updateBoleto',
    summary: 'Change the amount or due date before payment',
    ...nn,
    body: S.patchBoleto,
    responses: { 200: { description: 'The boleto', schema: BoletoResponse }, ...notFound, 409: { description: 'BOLETO_NOT_MODIFIABLE' } },
  }),
  cancel: route('DELETE /boletos/:nosso_numero', {
    operationId: 'cancelBoleto',
    summary: 'Cancel a registered boleto',
    ...nn,
    responses: { 200: { description: 'The cancelled boleto', schema: BoletoResponse }, ...notFound, 409: { description: 'BOLETO_NOT_CANCELLABLE' } },
  }),
  pay: route('POST /boletos/:nosso_numero/pay', {
    operationId: 'payBoleto',
    summary: 'Pay a boleto (sandbox of the payer’s side)',
    ...nn,
    body: S.payBoleto,
    bodyRequired: false,
    responses: {
      200: { description: 'The paid boleto', schema: BoletoResponse },
      ...notFound,
      409: { description: 'BOLETO_NOT_PAYABLE' },
      422: { description: 'PAYMENT_MISMATCH' },
    },
  }),
  settlements: route('GET /settlements', {
    operationId: 'listSettlements',
    summary: 'Settlements, newest first',
    query: S.listSettlementsQuery,
    responses: { 200: { description: 'One page', schema: envelope(z.array(Settlement), listMeta) } },
  }),
  settlement: route('GET /settlements/:id', {
    operationId: 'getSettlement',
    summary: 'One settlement with its boletos',
    params: S.settlementParams,
    responses: { 200: { description: 'The settlement', schema: envelope(Settlement) }, 404: { description: 'Settlement not found' } },
  }),
  trigger: route('POST /settlements/trigger', {
    operationId: 'triggerSettlement',
    summary: 'Settle the paid boletos now',
    body: S.triggerSettlement,
    bodyRequired: false,
    responses: {
      200: { description: 'Nothing to settle', schema: envelope(z.object({ settlements: z.array(Settlement), boleto_count: nonNegative, amount_cents: int, has_more: z.boolean() })) },
      201: { description: 'Settled', schema: envelope(z.object({ settlements: z.array(Settlement), boleto_count: nonNegative, amount_cents: int, has_more: z.boolean() })) },
    },
  }),
  health: route('GET /health', {
    operationId: 'centralHealth',
    summary: 'The central API answers and its database too',
    responses: { 200: { description: 'Up', schema: envelope(z.object({ status: z.literal('ok'), app_env: z.string(), time: timestamp })) } },
  }),
});
