import type { FastifyInstance } from 'fastify';
import type { AppContext } from '../context.js';
import { parseOrThrow } from '../http/validation.js';
import type { Balances } from '../ledger/ledger.js';
import { BalanceReader } from './balanceReader.js';
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

const JSON_UTF8 = 'application/json; charset=utf-8';

/** The answer of GET /balance as data (snake_case, as the spec names it). */
export function balanceView(accountId: number, b: Balances, asOf: string) {
  return {
    worked: true,
    account_id: accountId,
    currency: 'BRL',
    available: b.available,
    blocked: b.blocked,
    pending: b.pending,
    ledger_total: b.ledgerTotal,
    safe: b.safe,
    as_of: asOf,
  };
}

/**
 * The same answer as the exact bytes JSON.stringify gives for `balanceView` (camelCase keys for
 * X-Key-Case: camelCase), written directly: every value is an integer or an ISO timestamp, so
 * nothing needs escaping, and the hottest read skips the generic serialisation and key conversion.
 * test/unit/balance-json.test.ts holds it equal to the generic path.
 */
export function balanceJson(accountId: number, b: Balances, asOf: string, camelCase: boolean): string {
  const figures = `"available":${b.available},"blocked":${b.blocked},"pending":${b.pending}`;
  return camelCase
    ? `{"worked":true,"accountId":${accountId},"currency":"BRL",${figures},"ledgerTotal":${b.ledgerTotal},"safe":${b.safe},"asOf":"${asOf}"}`
    : `{"worked":true,"account_id":${accountId},"currency":"BRL",${figures},"ledger_total":${b.ledgerTotal},"safe":${b.safe},"as_of":"${asOf}"}`;
}

/** GET /balance and POST /cpf/validate (permission account:read). */
export async function accountRoutes(app: FastifyInstance, ctx: AppContext) {
  const balances = new BalanceReader(ctx.db, ctx.metrics.batchObserver('balance_read'));
  mount(app, accountApi.balance, async (req, reply) => {
    const { accountId } = principal(req);
    const b = await balances.read(accountId);
    return reply.type(JSON_UTF8).send(balanceJson(accountId, b, ctx.clock.now().toISOString(), req.ext.camelCase));
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
