import { DomainError, type ErrorCode } from '../errors/catalog.js';

/**
 * Refusals of the Pix, return and webhook resources in the standard's words: a DomainError of the
 * catalog (its code decides the status) carrying the standard's error type and its violations,
 * which the API Pix edge writes as RFC 7807 (`https://pix.bcb.gov.br/api/v2/error/<tipo>`).
 */
export interface Violacao {
  razao: string;
  propriedade: string;
  valor?: string;
}

export function pixProblem(code: ErrorCode, tipo: string, detail: string, violacoes?: Violacao[]): DomainError {
  return new DomainError(code, { detail, message: detail, extra: { apiPixType: tipo, ...(violacoes ? { violacoes } : {}) } });
}
