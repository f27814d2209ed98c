import { z } from 'zod';
import { baseUnits, int, named, timestamp } from '../http/apiSchemas.js';
import { defineRoutes } from '../http/routeSpec.js';

export const CPF_PROBLEMS = ['wrong_length', 'invalid_characters', 'repeated_digits', 'invalid_check_digits'] as const;

export const cpfBody = z.strictObject({ cpf: z.string().max(32) });

const Balance = named(
  'Balance',
  z.object({
    worked: z.literal(true),
    account_id: int,
    currency: z.literal('BRL'),
    available: baseUnits,
    blocked: baseUnits,
    pending: baseUnits,
    ledger_total: int,
    safe: int,
    as_of: timestamp,
  }),
);

const CpfValidation = named(
  'CpfValidation',
  z.union([
    z.object({ worked: z.literal(true), valid: z.literal(true), cpf: z.string(), formatted: z.string() }),
    z.object({ worked: z.literal(true), valid: z.literal(false), cpf: z.string(), reason: z.enum(CPF_PROBLEMS), detail: z.string() }),
  ]),
);

/** GET /balance and POST /cpf/validate (permission account:read). */
export const accountApi = defineRoutes({
  balance: {
    method: 'GET',
    path: '/balance',
    operationId: 'getBalance',
    tag: 'Account',
    summary: 'Balance of the key’s account',
    description: 'Available, blocked (MED), pending (outbound in flight), their sum and the safe balance, in base units. Not rate limited.',
    permission: 'account:read',
    config: { rateLimit: false },
    responses: { 200: { description: 'The balances', schema: Balance } },
  },
  cpfValidate: {
    method: 'POST',
    path: '/cpf/validate',
    operationId: 'validateCpf',
    tag: 'Account',
    summary: 'Validate a CPF',
    permission: 'account:read',
    signed: true,
    body: cpfBody,
    bodyExample: { cpf: '529.982.247-25' },
    responses: {
      200: { description: 'Whether the CPF is valid (digits and formatted form), or why not', schema: CpfValidation },
      400: { description: 'Malformed body' },
    },
  },
});
