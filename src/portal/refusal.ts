import { asHttpError } from '../http/errorMap.js';
import type { HttpError } from '../http/errors.js';

/**
 * The answer a domain function's refusal would have had on the API (an HttpError as it is, a
 * DomainError in the operation shape, whose `detail` is what a person reads); undefined for a fault.
 * The portal shows its message (errorText) and answers its status.
 */
export function portalRefusal(err: unknown): HttpError | undefined {
  return asHttpError(err, 'operation');
}
