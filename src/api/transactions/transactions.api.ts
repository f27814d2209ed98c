import { z } from 'zod';
import { baseUnits, int, named, timestamp } from '../../http/apiSchemas.js';
import { pageAndDatesQuery, readerParam } from '../../http/listParams.js';
import { defineRoutes } from '../../http/routeSpec.js';
import { STATEMENT_FILTERS, TRANSACTION_TYPES } from '../../transactions/repository.js';

/** What moved: the statement, the transaction list, the lookups and the receipt (parsed by src/transactions/statement.ts). */
export const listQuery = z.object({
  ...pageAndDatesQuery,
  status: readerParam(z.enum(STATEMENT_FILTERS), 'Statement status filter (empty = none)'),
  type: readerParam(z.enum(TRANSACTION_TYPES), 'Transaction type filter (empty = none)'),
});

const statementFields = {
  id: z.string(),
  transaction_id: z.string(),
  end_to_end_id: z.string().nullable(),
  external_id: z.string().nullable(),
  type: z.enum(TRANSACTION_TYPES),
  status: z.enum(['completed', 'pending', 'rejected', 'failed']),
  payment_status: z.string().nullable(),
  amount: baseUnits,
  fee_amount: baseUnits,
  net_amount: int,
  description: z.string().nullable(),
  direction: z.enum(['inbound', 'outbound']),
  counterparty_name: z.string().nullable(),
  recipient_key: z.string().nullable(),
  payer_document: z.string().nullable(),
  recipient_document: z.string().nullable(),
  payer_ispb: z.string().nullable(),
  payer_bank_name: z.string().nullable(),
  created_at: timestamp.nullable(),
  completed_at: timestamp.nullable(),
};
export const StatementItem = named('StatementItem', z.object(statementFields));

const recordFields = {
  ...statementFields,
  final: z.boolean(),
  tag: z.string().nullable(),
  recipient_key_type: z.string().nullable(),
  recipient_ispb: z.string().nullable(),
  recipient_bank_name: z.string().nullable(),
  original_transaction_id: z.string().nullable(),
  returned_amount: baseUnits.nullable(),
  reason_code: z.string().nullable(),
  updated_at: timestamp.nullable(),
};
export const TransactionRecord = named('TransactionRecord', z.object(recordFields));
const TransactionLookup = named('TransactionLookup', z.object({ worked: z.literal(true), ...recordFields }));

const page = { page: int, per_page: int };
const Statement = named('Statement', z.object({ worked: z.literal(true), data: z.array(StatementItem), ...page }));
const TransactionList = named('TransactionList', z.object({ worked: z.literal(true), data: z.array(TransactionRecord), ...page }));

const Party = named(
  'ReceiptParty',
  z.object({ name: z.string().nullable(), document: z.string().nullable(), ispb: z.string().nullable(), bank_name: z.string().nullable(), pix_key: z.string().nullable() }),
);
const Receipt = named(
  'Receipt',
  z.object({
    worked: z.literal(true),
    transaction_id: z.string(),
    end_to_end_id: z.string().nullable(),
    type: z.enum(TRANSACTION_TYPES),
    direction: z.enum(['inbound', 'outbound']),
    amount: baseUnits,
    description: z.string().nullable(),
    date: timestamp.nullable(),
    payer: Party,
    receiver: Party,
  }),
);

const notFound = { 404: { description: 'Transaction not found' } };
const lookup = (operationId: string, path: string, summary: string) =>
  ({
    method: 'GET',
    path,
    operationId,
    tag: 'Transactions',
    summary,
    permission: 'transfer:read',
    responses: { 200: { description: 'The record', schema: TransactionLookup }, ...notFound },
  }) as const;

export const transactionsApi = defineRoutes({
  statement: {
    method: 'GET',
    path: '/statement',
    operationId: 'getStatement',
    tag: 'Transactions',
    summary: 'The statement, newest first',
    description: 'Page 1 also shows the outbound PIX still in flight (status pending, payment_status processing) ahead of the page.',
    permission: 'statement:read',
    query: listQuery,
    errorShape: 'business_worked',
    responses: { 200: { description: 'One page of the statement', schema: Statement } },
  },
  list: {
    method: 'GET',
    path: '/transactions',
    operationId: 'listTransactions',
    tag: 'Transactions',
    summary: 'Transactions, newest first, as the lookups show them',
    permission: 'transfer:read',
    query: listQuery,
    errorShape: 'business_worked',
    responses: { 200: { description: 'One page of transactions', schema: TransactionList } },
  },
  byId: lookup('getTransaction', '/transactions/:id', 'A transaction by transaction_id or id'),
  byE2e: lookup('getTransactionByEndToEndId', '/transactions/e2e/:e2e_id', 'A transaction by end-to-end id'),
  byTag: lookup('getTransactionByTag', '/transactions/tag/:tag', 'A transaction by tag'),
  byExternalId: lookup('getTransactionByExternalId', '/transactions/ref/:external_id', 'A transaction by external_id'),
  receipt: {
    method: 'GET',
    path: '/transactions/:id/receipt',
    operationId: 'getReceipt',
    tag: 'Transactions',
    summary: 'The receipt of a settled PIX',
    permission: 'transfer:read',
    responses: {
      200: { description: 'The receipt', schema: Receipt },
      ...notFound,
      422: { description: 'The PIX is not settled yet' },
    },
  },
});
