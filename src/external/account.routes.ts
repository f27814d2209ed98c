import type { FastifyInstance } from 'fastify';
import type { AppContext } from '../context.js';
import { parseOrThrow } from '../http/validation.js';
import { readBalances } from '../ledger/ledger.js';
import { cpfDigits, cpfProblem, type CpfProblem } from '../lib/documents.js';
import { mount } from '../http/routeSpec.js';
import { accountApi, cpfBody } from './account.api.js';
import { principal } from './pipeline.js';

const CPF_REASONS: Record<CpfProblem, string> = {
  wrong_length: 'A CPF has 11 digits',
  invalid_characters: 'A CPF holds digits only, optionally punctuated as 000.000.000-00',
  repeated_digits: 'A CPF cannot be one digit repeated 11 times',
  invalid_check_digits: 'The check digits do not match the first nine digits',
};

/** GET /balance and POST /cpf/validate (permission account:read). */
export async function accountRoutes(app: FastifyInstance, ctx: AppContext) {
  mount(app, accountApi.balance, async (req) => {
    const { accountId } = principal(req);
    const b = await readBalances(ctx.db, accountId);
    return {
      worked: true,
      account_id: accountId,
      currency: 'BRL',
      available: b.available,
      blocked: b.blocked,
      pending: b.pending,
      ledger_total: b.ledgerTotal,
      safe: b.safe,
      as_of: ctx.clock.now().toISOString(),
    };
  });

  mount(app, accountApi.cpfValidate, async (req) => {
    const { cpf } = parseOrThrow(cpfBody, req.body);
    const problem = cpfProblem(cpf);
    if (problem === null) {
      const digits = cpfDigits(cpf)!;
      return {
        worked: true,
        valid: true,
        cpf: digits,
        formatted: `${digits.slice(0, 3)}.${digits.slice(3, 6)}.${digits.slice(6, 9)}-${digits.slice(9)}`,
      };
    }
    return { worked: true, valid: false, cpf, reason: problem, detail: CPF_REASONS[problem] };
  });
}
